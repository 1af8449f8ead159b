import Foundation
import Logging
import ReactorExamples
import Testing

@testable import ReactorHosting

/// Stored JSON goes out as it is stored (a replayed event's `data:` line, the history route), so
/// an activation checks it first: what would not parse, or would break its line, is not sent.
@Suite struct DamagedStoredJSONTests {
    private let store = InMemorySessionStore(historyCapacity: 16)
    private let id = "JJJJJJJJJJJJJJJJJJJJJJ"

    private func makeHost() -> ReactorHost {
        var registry = ReactorRegistry()
        registry.register("counter") { CounterReactor(delay: .zero) }
        var configuration = HostingConfiguration()
        configuration.store = store
        configuration.historyCapacity = 16
        return ReactorHost(
            registry: registry, configuration: configuration, logger: Logger(label: "test"),
            errorEvent: { _ in [] })
    }

    private func state(value: Int) -> String {
        #"{"alertMessage":{"count":0,"value":null},"isLoading":false,"value":\#(value)}"#
    }

    /// Stores the counter created at version 0, then `versions` (version 1 first).
    private func storeSession(versions: [String]) throws {
        var writes: [SessionWrite] = [.create(id: id, type: "counter", state: Array(state(value: 0).utf8), lastActivity: 0)]
        for (offset, json) in versions.enumerated() {
            writes.append(
                .version(
                    id: id, version: UInt64(offset + 1), state: Array(json.utf8), startedThrough: 0, producedBy: 0,
                    lastActivity: 0))
        }
        _ = try store.commit(writes)
    }

    @Test(arguments: [
        #"{"alertMessage":{"count":0,"value":null},"isLoading":false,"value":"#,
        "{\"alertMessage\":{\"count\":0,\"value\":null},\n\n\"isLoading\":false,\"value\":2}",
        #"{"alertMessage":{"count":0,"value":null},"isLoading":false,"value":2}}"#,
        "",
    ])
    func aDamagedVersionAndTheOlderOnesAreNotSentAgain(damaged: String) throws {
        try storeSession(versions: [state(value: 1), damaged, state(value: 3), state(value: 4), state(value: 5)])
        let host = makeHost()
        defer { host.shutdown() }
        let instance = try #require(try host.instance(id: id))
        #expect(instance.timeline.latest.version == 5)
        #expect(instance.timeline.latest.json == Array(state(value: 5).utf8))
        // Versions after the damaged one replay as stored.
        let replayed = try #require(instance.timeline.states(after: 2))
        #expect(replayed.map(\.version) == [3, 4, 5])
        #expect(replayed.map(\.json) == [3, 4, 5].map { Array(state(value: $0).utf8) })
        // From before it, the history does not hold them all: the client gets the state.
        #expect(instance.timeline.states(after: 1) == nil)
        #expect(instance.timeline.states(after: 0) == nil)
        #expect(instance.timeline.history(after: nil).versions.map(\.state.version) == [3, 4, 5])
        // Nothing stored changed.
        let stored = try #require(try store.load(id: id))
        #expect(stored.history.map(\.state).contains(Array(damaged.utf8)))
    }

    @Test func anIntactHistoryIsSentAgainWhole() throws {
        try storeSession(versions: (1...5).map(state(value:)))
        let host = makeHost()
        defer { host.shutdown() }
        let instance = try #require(try host.instance(id: id))
        #expect(instance.timeline.states(after: 0)?.map(\.version) == [1, 2, 3, 4, 5])
        #expect(instance.timeline.history(after: nil).versions.map(\.state.version) == [0, 1, 2, 3, 4, 5])
    }

    @Test func aStoredStateThatDecodesAcrossLinesIsSentOnOne() throws {
        let pretty = "{\n  \"alertMessage\" : {\"count\": 0, \"value\": null},\r\n  \"isLoading\" : false,\n  \"value\" : 7\n}"
        _ = try store.commit([.create(id: id, type: "counter", state: Array(pretty.utf8), lastActivity: 0)])
        let host = makeHost()
        defer { host.shutdown() }
        let instance = try #require(try host.instance(id: id))
        #expect(instance.timeline.latest.json == Array(state(value: 7).utf8))
        #expect(try store.load(id: id)?.state == Array(pretty.utf8))
    }

    /// A state decodes when what is damaged is a key its type does not read (Foundation's
    /// decoder skips it unchecked), here a control character left raw in a string, which no strict
    /// JSON reader takes: the state goes out encoded again, from what was decoded.
    @Test func aStoredStateDamagedWhereItsTypeDoesNotReadIsSentEncodedAgain() throws {
        let damaged = #"{"alertMessage":{"count":1,"value":"hi"},"isLoading":false,"note":"\#u{1}","value":7}"#
        _ = try store.commit([.create(id: id, type: "counter", state: Array(damaged.utf8), lastActivity: 0)])
        let host = makeHost()
        defer { host.shutdown() }
        let instance = try #require(try host.instance(id: id))
        #expect(instance.timeline.latest.json == Array(#"{"alertMessage":{"count":1,"value":"hi"},"isLoading":false,"value":7}"#.utf8))
        #expect(try store.load(id: id)?.state == Array(damaged.utf8))
    }

    @Test(arguments: [
        ("{\"a\":1}", true), ("[1,\"two\",null]", true), ("\"text\"", true), ("3", true),
        ("{\"a\":1", false), ("{\"a\":1}x", false), ("{\"a\":\n1}", false), ("{\"a\":1}\r", false), ("", false),
        ("{\"a\":\"\u{1}\"}", false),
    ])
    func singleLineJSON(text: String, accepted: Bool) {
        #expect(JSONCoding.isSingleLineJSON(Array(text.utf8)) == accepted)
    }

    @Test func bytesThatAreNotUTF8AreNotSingleLineJSON() {
        #expect(!JSONCoding.isSingleLineJSON([0x22, 0xFF, 0xFE, 0x22]))
    }
}
