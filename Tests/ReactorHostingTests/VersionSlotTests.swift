import Locking
import Logging
import ReactorCore
import ReactorExamples
import Testing

@testable import ReactorHosting

/// With async durability a session keeps the versions it shows for the batch being queued in a
/// slot, instead of queuing each: a version a later one stands for is dropped there once its
/// action has settled, and the committer takes the rest, in order, with the batch.
@Suite struct VersionSlotTests {
    private func makeSlot() -> VersionSlot<Int> {
        let (_, publisher) = StateTimeline.make(initial: 0, historyCapacity: 16, subscriberLimit: 4)
        return VersionSlot(id: "a", publisher: publisher)
    }

    private func version(_ number: UInt64, producedBy: UInt64, of slot: VersionSlot<Int>) -> PublishedVersion<Int> {
        let (_, publisher) = StateTimeline.make(initial: 0, historyCapacity: 16, subscriberLimit: 4)
        return PublishedVersion(
            id: slot.id, state: Int(number) * 10, origin: VersionOrigin(version: number, producedBy: producedBy, publishedAt: 0),
            startedThrough: producedBy, lastActivity: 0, publisher: publisher)
    }

    private func offer(_ number: UInt64, producedBy: UInt64, to slot: VersionSlot<Int>) -> Bool {
        slot.offer(
            Int(number) * 10, origin: VersionOrigin(version: number, producedBy: producedBy, publishedAt: 0),
            startedThrough: producedBy, lastActivity: 0)
    }

    /// What the slot holds, oldest first: "version/state", with "s" when its action settled.
    private func taken(_ slot: VersionSlot<Int>) -> [String] {
        slot.take().map { version, settled in
            guard case .version(_, let number, let state, _, _, _) = version.write() else { return "?" }
            return "\(number)/\(String(decoding: state, as: UTF8.self))\(settled ? "s" : "")"
        }
    }

    @Test func onlyTheCommitterFillsAnEmptySlot() {
        let slot = makeSlot()
        #expect(!offer(1, producedBy: 1, to: slot), "an empty slot belongs to no batch yet")
        slot.fill(with: version(1, producedBy: 1, of: slot))
        #expect(offer(2, producedBy: 1, to: slot))
        #expect(taken(slot) == ["1/10", "2/20"])
        #expect(!offer(3, producedBy: 1, to: slot), "taking empties the slot")
    }

    @Test func aVersionIsDroppedOnlyOnceItsActionSettledAndALaterOneFollows() {
        let slot = makeSlot()
        slot.fill(with: version(1, producedBy: 1, of: slot))
        #expect(offer(2, producedBy: 1, to: slot))
        #expect(offer(3, producedBy: 1, to: slot))
        // Action 1 settles: its versions a later one follows go, its last stays (settled).
        slot.settled(1)
        #expect(offer(4, producedBy: 2, to: slot), "version 3 goes: its action settled and 4 follows")
        #expect(offer(5, producedBy: 2, to: slot))
        slot.settled(7)
        #expect(taken(slot) == ["4/40", "5/50"], "action 2 has not settled: a restart counts both")
    }

    @Test func aVersionNoActionProducedIsDroppedWhenALaterOneFollows() {
        let slot = makeSlot()
        slot.fill(with: version(1, producedBy: 0, of: slot))
        #expect(offer(2, producedBy: 0, to: slot))
        #expect(offer(3, producedBy: 4, to: slot))
        #expect(taken(slot) == ["3/30"])
    }

    @Test func aFullSlotRefusesAndChangesNothing() {
        let slot = makeSlot()
        slot.fill(with: version(1, producedBy: 1, of: slot))
        for number in 2...UInt64(VersionSlot<Int>.capacity) { #expect(offer(number, producedBy: 1, to: slot)) }
        #expect(!offer(99, producedBy: 1, to: slot), "the committer queues it after what the slot holds")
        #expect(taken(slot) == (1...VersionSlot<Int>.capacity).map { "\($0)/\($0 * 10)" })
    }

    @Test func settlingKeepsTheOrderOfWhatStays() {
        let slot = makeSlot()
        slot.fill(with: version(1, producedBy: 1, of: slot))
        #expect(offer(2, producedBy: 2, to: slot))
        #expect(offer(3, producedBy: 1, to: slot))
        #expect(offer(4, producedBy: 2, to: slot))
        slot.settled(2)
        #expect(taken(slot) == ["1/10", "3/30", "4/40s"], "version 2 goes; 4, the last, stays")
    }

    @Test func clearingDropsEverything() {
        let slot = makeSlot()
        slot.fill(with: version(1, producedBy: 1, of: slot))
        #expect(offer(2, producedBy: 1, to: slot))
        slot.clear()
        #expect(taken(slot).isEmpty)
        #expect(!offer(3, producedBy: 1, to: slot))
    }
}

/// The slots in a host with async durability: what its commits hold.
@Suite struct AsyncVersionSlotTests {
    private let store = InMemorySessionStore(historyCapacity: 64)

    private func makeHost(store: any SessionStore) -> ReactorHost {
        var registry = ReactorRegistry()
        registry.register("counter") { CounterReactor(delay: .zero) }
        var configuration = HostingConfiguration()
        configuration.store = store
        configuration.durability = .async(flushInterval: .seconds(3600))
        configuration.historyCapacity = 64
        return ReactorHost(
            registry: registry, configuration: configuration, logger: Logger(label: "test"), errorEvent: { _ in [] })
    }

    /// A host whose store records each batch it commits, and a counter it created and committed;
    /// the batches are recorded from then on.
    private func committedCounter() async throws -> (ReactorHost, any HostedInstance, Locked<[[SessionWrite]]>) {
        let batches = Locked<[[SessionWrite]]>([])
        let host = makeHost(store: HookedStore(store, beforeCommit: { writes in batches.withLock { $0.append(writes) } }))
        let (instance, _) = try host.create(try #require(host.registry.type(named: "counter")))
        await committed(host)
        batches.withLock { $0 = [] }
        return (host, instance, batches)
    }

    private func committed(_ host: ReactorHost) async {
        await withCheckedContinuation { done in host.committer!.afterCommit { done.resume() } }
    }

    private func increase(_ instance: any HostedInstance, times: Int) async throws {
        for _ in 0..<times {
            let (receipt, _) = try instance.send(actionJSON: Array(#""increase""#.utf8))
            await withCheckedContinuation { done in instance.whenSettled(receipt) { done.resume() } }
        }
    }

    private func versions(of id: String, in batches: [[SessionWrite]]) -> [UInt64] {
        batches.flatMap { $0 }.compactMap { write in
            guard case .version(id, let version, _, _, _, _) = write else { return nil }
            return version
        }
    }

    @Test func anUnwatchedSessionCommitsItsLatestVersionAndNoRecordOfSettledActions() async throws {
        let (host, instance, batches) = try await committedCounter()
        defer { host.shutdown() }
        try await increase(instance, times: 5)
        await committed(host)
        let written = batches.withLock { $0 }
        #expect(versions(of: instance.id, in: written) == [20], "four versions per action; the last stands for the rest")
        #expect(!written.flatMap { $0 }.contains { if case .accept = $0 { true } else { false } })
        let stored = try #require(try store.load(id: instance.id))
        #expect(stored.version == 20)
        #expect(String(decoding: stored.state, as: UTF8.self).contains(#""value":5"#))
    }

    @Test func aWatchedSessionCommitsEveryVersionItsReadersMayHaveSeen() async throws {
        let (host, instance, batches) = try await committedCounter()
        defer { host.shutdown() }
        try await increase(instance, times: 1)
        // A reader comes while the slot holds version 4: from the next version on, every one is
        // kept, even within the batch.
        try instance.timeline.attach(Watcher())
        try await increase(instance, times: 2)
        await committed(host)
        #expect(versions(of: instance.id, in: batches.withLock { $0 }) == Array(5...12))
    }

    @Test func aDeleteGoesAfterTheVersionsTheSlotHolds() async throws {
        let (host, instance, batches) = try await committedCounter()
        defer { host.shutdown() }
        try await increase(instance, times: 2)
        _ = try host.delete(id: instance.id)
        await committed(host)
        let written = batches.withLock { $0 }.flatMap { $0 }
        let version = try #require(written.firstIndex { if case .version = $0 { true } else { false } })
        let delete = try #require(written.firstIndex { if case .delete = $0 { true } else { false } })
        #expect(version < delete)
        #expect(try store.load(id: instance.id) == nil, "deleted stays deleted")
    }
}

/// An event stream that reads nothing: what makes a session watched.
private final class Watcher: TimelineSubscriber {
    func wake() {}
    func enqueue(event: [UInt8]) {}
}
