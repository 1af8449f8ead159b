import Foundation
import Testing

@testable import ReactorHosting

/// Decoding states stored by an earlier build of a reactor: missing keys come from the initial
/// state, at the place the decoder names; anything else still fails.
@Suite struct StoredStateDecodingTests {
    struct Task: Codable, Equatable {
        var title: String
        var done: Bool
        var tags: [String]
    }

    struct Board: Codable, Equatable {
        var name: String
        var tasks: [Task]
        var owner: Owner
        var views: Int64
        var ratio: Double

        struct Owner: Codable, Equatable {
            var login: String
            var isAdmin: Bool
        }
    }

    private let initial = Board(
        name: "", tasks: [Task(title: "", done: false, tags: ["new"])],
        owner: .init(login: "nobody", isAdmin: false), views: 0, ratio: 1)

    private func decode(_ json: String) throws(HostingError) -> StoredStateDecoding.Decoded<Board> {
        try StoredStateDecoding.decode(
            Board.self, stored: Array(json.utf8),
            initialState: try! JSONCoding.encode(initial))
    }

    @Test func aStateThatDecodesIsTakenAsItIs() throws {
        let decoded = try decode(#"{"name":"a","owner":{"isAdmin":true,"login":"x"},"ratio":0.1,"tasks":[],"views":9007199254740993}"#)
        #expect(decoded.filledKeys.isEmpty)
        #expect(decoded.state.views == 9_007_199_254_740_993)
    }

    @Test func missingKeysAreFilledAtTheirPlaceAndTheRestIsKeptExactly() throws {
        let decoded = try decode(#"{"name":"a","owner":{"login":"x"},"ratio":0.1,"tasks":[{"title":"t"}],"views":9007199254740993}"#)
        #expect(
            decoded.state
                == Board(
                    name: "a", tasks: [Task(title: "t", done: false, tags: ["new"])],
                    owner: .init(login: "x", isAdmin: false), views: 9_007_199_254_740_993, ratio: 0.1))
        #expect(Set(decoded.filledKeys) == ["owner.isAdmin", "tasks.[0].done", "tasks.[0].tags"])
    }

    @Test func aKeyTheInitialStateHasNoPlaceForIsNotInvented() {
        // The initial state has one task: nothing to take a second task's `done` from.
        #expect(
            throws: HostingError.storedSessionIncompatible(
                "the stored state does not decode as the type's State: missing field 'done' at 'tasks.[1]'")
        ) {
            _ = try decode(
                #"{"name":"a","owner":{"isAdmin":false,"login":"x"},"ratio":1,"tasks":[{"done":true,"tags":[],"title":"t"},{"tags":[],"title":"u"}],"views":1}"#
            )
        }
    }

    @Test func aChangedTypeIsNotBridged() {
        #expect(
            throws: HostingError.storedSessionIncompatible(
                "the stored state does not decode as the type's State: wrong type at 'views': expected an integer")
        ) {
            _ = try decode(#"{"name":"a","owner":{"isAdmin":false,"login":"x"},"ratio":1,"tasks":[],"views":"many"}"#)
        }
    }

    @Test func bytesThatAreNotJSONAreNotBridged() {
        #expect(throws: HostingError.self) { _ = try decode("{not json") }
    }
}
