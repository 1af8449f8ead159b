import Foundation
import Locking
import Logging
import ReactorCore
import ReactorExamples
import Testing

@testable import ReactorHosting

/// Idempotency keys: an action retried with the key of its first attempt is answered as that
/// attempt was and applied once, from several threads at once, across activations; the same
/// key with another action is refused.
@Suite struct IdempotencyTests {
    private let store = InMemorySessionStore(historyCapacity: 16)

    private func makeHost() -> ReactorHost {
        var registry = ReactorRegistry()
        registry.register("counter") { CounterReactor(delay: .zero) }
        var configuration = HostingConfiguration()
        configuration.store = store
        configuration.durability = .sync
        return ReactorHost(
            registry: registry, configuration: configuration, logger: Logger(label: "test"),
            errorEvent: { _ in [] })
    }

    private let increase = Array(#""increase""#.utf8)

    private func value(of instance: any HostedInstance, after sequence: UInt64) async throws -> Int {
        await withCheckedContinuation { continuation in
            instance.whenSettled(ActionReceipt(sequence: sequence)) { continuation.resume() }
        }
        return try JSONDecoder().decode(CounterReactor.State.self, from: Data(instance.timeline.latest.json)).value
    }

    @Test func aRetryIsAnsweredAsTheFirstAttemptAndAppliedOnce() async throws {
        let host = makeHost()
        defer { host.shutdown() }
        let (instance, _) = try host.create(try #require(host.registry.type(named: "counter")))
        let first = try instance.send(actionJSON: increase, trace: nil, idempotencyKey: "k1")
        #expect(first.receipt.sequence == 1 && !first.isReplay)
        let retry = try instance.send(actionJSON: increase, trace: nil, idempotencyKey: "k1")
        #expect(retry.receipt.sequence == 1 && retry.isReplay)
        #expect(try await value(of: instance, after: 1) == 1)
        // The same key with another action is refused, and nothing is sent.
        #expect(throws: HostingError.idempotencyKeyReused(seq: 1)) {
            _ = try instance.send(actionJSON: Array(#""decrease""#.utf8), trace: nil, idempotencyKey: "k1")
        }
        let second = try instance.send(actionJSON: increase, trace: nil, idempotencyKey: "k2")
        #expect(second.receipt.sequence == 2 && !second.isReplay)
        #expect(try await value(of: instance, after: 2) == 2)
    }

    @Test func retriesArrivingTogetherSendTheActionOnce() async throws {
        let host = makeHost()
        defer { host.shutdown() }
        let (instance, _) = try host.create(try #require(host.registry.type(named: "counter")))
        let outcomes = Locked<[(UInt64, Bool)]>([])
        let increase = self.increase
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            if let sent = try? instance.send(actionJSON: increase, trace: nil, idempotencyKey: "together") {
                outcomes.withLock { $0.append((sent.receipt.sequence, sent.isReplay)) }
            }
        }
        let all = outcomes.withLock { $0 }
        #expect(all.count == 16)
        #expect(Set(all.map(\.0)) == [1])
        #expect(all.filter { !$0.1 }.count == 1)
        #expect(try await value(of: instance, after: 1) == 1)
    }

    @Test func aKeyIsRememberedFromTheStoreWhenItsSessionComesBack() async throws {
        let id = "MMMMMMMMMMMMMMMMMMMMMM"
        let state = Array(#"{"alertMessage":{"count":0,"value":null},"isLoading":false,"value":1}"#.utf8)
        // The action seq 3 was sent with the key, applied and settled before a restart.
        _ = try store.commit([
            .create(id: id, type: "counter", state: state, lastActivity: 0),
            .accept(
                id: id, seq: 3, action: increase, key: RememberedKey(key: "before", seq: 3, digest: RememberedKey.digest(of: increase))),
            .version(id: id, version: 4, state: state, startedThrough: 3, producedBy: 3, lastActivity: 0),
            .settle(id: id, seq: 3),
        ])
        #expect(try store.load(id: id)?.rememberedKeys.map(\.key) == ["before"])
        let host = makeHost()
        defer { host.shutdown() }
        let instance = try #require(try host.instance(id: id))
        let retry = try instance.send(actionJSON: increase, trace: nil, idempotencyKey: "before")
        #expect(retry.receipt.sequence == 3 && retry.isReplay)
        #expect(retry.ticket == nil)  // committed before the restart
        let fresh = try instance.send(actionJSON: increase, trace: nil, idempotencyKey: "after")
        #expect(fresh.receipt.sequence == 4 && !fresh.isReplay)
        #expect(try await value(of: instance, after: 4) == 2)
    }

    @Test func keysOfActionsThatLeftTheWindowAreForgotten() throws {
        let keys = IdempotencyKeys()
        let window = RememberedKey.window
        var next: UInt64 = 0
        func send(_ key: String) throws -> Bool {
            try keys.lookUpOrSend(key, digest: 0) { () throws(HostingError) in
                next += 1
                return (next, nil)
            }.isReplay
        }
        #expect(try !send("first"))
        #expect(try send("first"))
        for index in 1...(2 * window) { _ = try send("key \(index)") }
        // More than twice the window was sent since: the first key is gone, the last ones stay.
        #expect(try !send("first"))
        #expect(try send("key \(2 * window)"))
        #expect(RememberedKey.isValid("8e03978e-40d5-43e8-bc93-6894a57f9324"))
        #expect(!RememberedKey.isValid("") && !RememberedKey.isValid("a b") && !RememberedKey.isValid(String(repeating: "k", count: 256)))
    }
}
