import Dispatch
import Locking
import ReactorCore
import Synchronization
import Testing
import Tracing

@testable import ReactorHosting

/// The instance table: ids map to keys without loss, and the limit holds across its shards.
@Suite struct InstanceTableTests {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

    @Test func idsThatDifferInAnyOneCharacterHaveDifferentKeys() throws {
        let id = Array(InstanceID.make())
        let key = try #require(InstanceKey(String(id)))
        var seen: Set<InstanceKey> = [key]
        for position in id.indices {
            for character in Self.alphabet where character != id[position] {
                var changed = id
                changed[position] = character
                let other = try #require(InstanceKey(String(changed)))
                #expect(seen.insert(other).inserted, "\(String(changed)) shares a key")
            }
        }
        #expect(seen.count == 1 + 22 * 63)
        #expect(InstanceKey(String(id)) == key)
    }

    @Test(arguments: [
        "", "short", String(repeating: "A", count: 21), String(repeating: "A", count: 23),
        String(repeating: "A", count: 21) + "+", String(repeating: "A", count: 21) + "=",
        String(repeating: "A", count: 21) + "é", "AAAAAAAAAA/AAAAAAAAAAA",
    ])
    func anythingButTwentyTwoAlphabetCharactersHasNoKey(_ text: String) {
        #expect(InstanceKey(text) == nil)
    }

    @Test func concurrentCreationsStopExactlyAtTheLimit() throws {
        let store = InstanceTable(limit: 40)
        // `Locked`, not `Mutex`: ThreadSanitizer (`make sanitize`) sees only pthread mutexes.
        let created = Locked<[String]>([])
        let refused = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            do {
                let instance = try store.create { FakeInstance(id: $0) }
                created.withLock { $0.append(instance.id) }
            } catch {
                refused.wrappingAdd(1, ordering: .relaxed)
            }
        }
        let ids = created.withLock { $0 }
        #expect(ids.count == 40)
        #expect(refused.load(ordering: .relaxed) == 24)
        #expect(store.count == 40)
        for id in ids { #expect(store.instance(id)?.id == id) }

        #expect(store.remove(ids[0])?.id == ids[0])
        #expect(store.instance(ids[0]) == nil)
        #expect(store.remove(ids[0]) == nil)
        #expect(store.count == 39)
        _ = try store.create { FakeInstance(id: $0) }
        #expect(throws: HostingError.self) { try store.create { FakeInstance(id: $0) } }
    }

    @Test func idleInstancesAreRemovedFromEveryShard() throws {
        let store = InstanceTable(limit: 1000)
        var busy: [String] = []
        for index in 0..<400 {
            let instance = try store.create { FakeInstance(id: $0, lastActivity: index.isMultiple(of: 4) ? 100 : 10) }
            if index.isMultiple(of: 4) { busy.append(instance.id) }
        }
        let idle = store.removeIdle(before: 50)
        #expect(idle.count == 300)
        #expect(store.count == 100)
        for id in busy { #expect(store.instance(id) != nil) }
        for instance in idle { #expect(store.instance(instance.id) == nil) }
        #expect(store.removeAll().count == 100)
        #expect(store.count == 0)
    }
}

/// The least a hosted instance can be: an id, an empty timeline and a fixed last activity.
private final class FakeInstance: HostedInstance {
    let owner: String? = nil
    let id: String
    let typeName = "fake"
    let timeline = StateTimeline.make(initial: 0, historyCapacity: 1, subscriberLimit: 1).timeline
    let lastActivity: UInt64

    init(id: String, lastActivity: UInt64 = 0) {
        self.id = id
        self.lastActivity = lastActivity
    }

    var isBusy: Bool { false }
    func touch() {}
    func send(actionJSON: [UInt8], trace: (any Span)?) throws(HostingError) -> (ActionReceipt, CommitTicket?) {
        throw HostingError.invalidAction("none taken")
    }
    func send(actionJSON: [UInt8], trace: (any Span)?, idempotencyKey: String)
        throws(HostingError) -> (receipt: ActionReceipt, ticket: CommitTicket?, isReplay: Bool)
    {
        throw HostingError.invalidAction("none taken")
    }
    func whenSettled(_ receipt: ActionReceipt, reportingCommit body: @escaping @Sendable (CommitOutcome) -> Void) { body(.committed) }
    func dispose(_ reason: StreamEndReason?) {}
    var departure: InstanceDeparture? { nil }
    var wasDroppedByFailedCommit: Bool { false }
}
