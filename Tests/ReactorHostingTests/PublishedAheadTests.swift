import Dispatch
import Foundation
import Locking
import Logging
import ReactorCore
import ReactorExamples
import Testing

@testable import ReactorHosting

/// With async durability a process shows versions before the store has them: what bounds them,
/// and how a session whose process did not leave it cleanly resumes past every one of them, so
/// that no version number is ever shown with two different states.
@Suite struct PublishedAheadTests {
    private let store = InMemorySessionStore(historyCapacity: 16)
    private let skip = GroupCommitter.versionsShownAheadLimit + 1

    private func state(value: Int, isLoading: Bool) -> [UInt8] {
        Array(#"{"alertMessage":{"count":0,"value":null},"isLoading":\#(isLoading),"value":\#(value)}"#.utf8)
    }

    private func makeHost(
        store: any SessionStore, durability: Durability,
        clock: Locked<UInt64> = Locked(1_000_000_000)
    ) -> ReactorHost {
        var registry = ReactorRegistry()
        registry.register("counter") { CounterReactor(delay: .zero) }
        var configuration = HostingConfiguration()
        configuration.store = store
        configuration.durability = durability
        configuration.historyCapacity = 16
        configuration.passivateAfter = .seconds(60)
        configuration.now = { clock.withLock { $0 } }
        return ReactorHost(
            registry: registry, configuration: configuration, logger: Logger(label: "test"),
            errorEvent: { _ in [] })
    }

    private func committed(_ host: ReactorHost) async {
        await withCheckedContinuation { done in host.committer!.afterCommit { done.resume() } }
    }

    private func settled(_ instance: any HostedInstance, _ receipt: ActionReceipt) async {
        await withCheckedContinuation { done in instance.whenSettled(receipt) { done.resume() } }
    }

    // MARK: - The queue's bound and order

    @Test func asyncWritesAreAcknowledgedAtOnceOnlyWhileTheQueueHasRoom() async throws {
        let gated = CommitGate()
        let full = Locked(0)
        let committer = GroupCommitter(
            store: HookedStore(store, beforeCommit: gated.pass),
            durability: .async(flushInterval: .seconds(3600)), logger: Logger(label: "test"),
            observer: StoreObserver(queueFull: { full.withLock { $0 += 1 } }))
        defer {
            gated.open()
            committer.stop()
        }
        let atOnce = Locked(0)
        for index in 0..<GroupCommitter.queuedAheadLimit {
            committer.enqueue(.touch(id: "session-\(index % 100)", lastActivity: 1)) { outcome in
                if outcome == .committed { atOnce.withLock { $0 += 1 } }
            }
        }
        #expect(atOnce.withLock { $0 } == GroupCommitter.queuedAheadLimit)
        #expect(full.withLock { $0 } == 0)
        // One more: it waits for its commit, which the thread starts at once and the gate holds.
        let ticket = try #require(committer.enqueueAcknowledged(.touch(id: "session-0", lastActivity: 2)))
        let outcome = Locked<CommitOutcome?>(nil)
        ticket.whenCommitted { result in outcome.withLock { $0 = result } }
        gated.waitUntilCommitting()
        #expect(outcome.withLock { $0 } == nil)
        #expect(full.withLock { $0 } == 1)
        gated.open()
        await withCheckedContinuation { done in ticket.whenCommitted { _ in done.resume() } }
        #expect(outcome.withLock { $0 } == .committed)
        #expect(gated.commits.first == GroupCommitter.queuedAheadLimit + 1)
        // The queue is empty again: acknowledged at once.
        #expect(committer.enqueueAcknowledged(.touch(id: "session-1", lastActivity: 3)) == nil)
    }

    @Test func asyncWritesWhoseCommitFailsAreKeptAndCommittedOnceTheStoreTakesThemAgain() async throws {
        // A full disk: every commit fails until the test frees it.
        let full = Locked(true)
        let attempts = Locked(0)
        let retried = DispatchSemaphore(value: 0)
        let failing = HookedStore(
            store,
            beforeCommit: { (_: [SessionWrite]) throws(SessionStoreError) in
                let attempt = attempts.withLock { count in
                    count += 1
                    return count
                }
                let isFull = full.withLock { $0 }
                if attempt == 3 { retried.signal() }
                if isFull { throw SessionStoreError(.unavailable, "the disk is full") }
            })
        let dropped = Locked<Set<String>>([])
        let committer = GroupCommitter(
            store: failing, durability: .async(flushInterval: .milliseconds(1)), logger: Logger(label: "test"),
            retryPause: .milliseconds(20), failedInstances: { ids in dropped.withLock { $0.formUnion(ids) } })
        defer { committer.stop() }
        // Acknowledged at once, as async acknowledges: a session and two versions of it.
        let acknowledged = Locked(0)
        for write in [
            SessionWrite.create(id: "s", type: "counter", state: state(value: 0, isLoading: false), lastActivity: 0),
            .version(id: "s", version: 1, state: state(value: 1, isLoading: false), startedThrough: 1, producedBy: 1, lastActivity: 1),
        ] {
            committer.enqueue(write) { outcome in if outcome == .committed { acknowledged.withLock { $0 += 1 } } }
        }
        #expect(acknowledged.withLock { $0 } == 2)
        // Failed, and tried again, twice: nothing given up.
        #expect(retried.wait(timeout: .now() + 20) == .success)
        #expect(dropped.withLock { $0 }.isEmpty)
        #expect(try store.load(id: "s") == nil)
        // Space comes back: the same writes reach the store, and nothing was dropped.
        full.withLock { $0 = false }
        await withCheckedContinuation { done in committer.afterCommit { done.resume() } }
        #expect(try store.load(id: "s")?.version == 1)
        #expect(dropped.withLock { $0 }.isEmpty)
    }

    @Test func aSessionsWritesAfterOneThatWaitsWaitTooAndOtherSessionsDoNot() async throws {
        let gated = CommitGate()
        let committer = GroupCommitter(
            store: HookedStore(store, beforeCommit: gated.pass),
            durability: .async(flushInterval: .seconds(3600)), logger: Logger(label: "test"))
        defer {
            gated.open()
            committer.stop()
        }
        let heard = Locked<[String]>([])
        committer.enqueueHeld(.publishingAhead(id: "held"))
        committer.enqueue(.touch(id: "held", lastActivity: 1)) { _ in heard.withLock { $0.append("held") } }
        committer.enqueue(.touch(id: "other", lastActivity: 1)) { _ in heard.withLock { $0.append("other") } }
        committer.afterQueuedWrites { _ in heard.withLock { $0.append("after") } }
        #expect(committer.enqueueAcknowledged(.accept(id: "held", seq: 1, action: [])) != nil)
        #expect(committer.enqueueAcknowledged(.accept(id: "other", seq: 1, action: [])) == nil)
        gated.waitUntilCommitting()
        #expect(heard.withLock { $0 } == ["other"])
        gated.open()
        await withCheckedContinuation { done in committer.afterCommit { done.resume() } }
        await withCheckedContinuation { done in committer.afterCommit { done.resume() } }
        #expect(heard.withLock { $0 } == ["other", "held", "after"])
        // Its held writes committed: the session's next write is acknowledged at once.
        #expect(committer.enqueueAcknowledged(.accept(id: "held", seq: 2, action: [])) == nil)
    }

    // MARK: - Marking the sessions served ahead of the store

    @Test func anAsyncHostMarksWhatItServesBeforeShowingAnythingAndUnmarksWhatLeavesMemory() async throws {
        let id = "AAAAAAAAAAAAAAAAAAAAAA"
        _ = try store.commit([.create(id: id, type: "counter", state: state(value: 0, isLoading: false), lastActivity: 0)])
        let batches = Locked<[[SessionWrite]]>([])
        let recording = HookedStore(store, beforeCommit: { writes in batches.withLock { $0.append(writes) } })
        let clock = Locked<UInt64>(1_000_000_000)
        let host = makeHost(store: recording, durability: .async(flushInterval: .seconds(3600)), clock: clock)
        defer { host.shutdown() }
        let instance = try #require(try host.instance(id: id))
        let (receipt, _) = try instance.send(actionJSON: Array(#""increase""#.utf8))
        await settled(instance, receipt)
        #expect(instance.timeline.latest.version == 4)
        #expect(try store.load(id: id)?.publishedAhead == true)
        await committed(host)
        // The mark was committed with the session's first version or before it.
        let written = batches.withLock { $0 }
        let marked = try #require(written.firstIndex { $0.contains { if case .publishingAhead(id) = $0 { true } else { false } } })
        let shown = try #require(written.firstIndex { $0.contains { if case .version(id, _, _, _, _, _) = $0 { true } else { false } } })
        #expect(marked <= shown)
        // A new session is marked from its creation.
        let (created, _) = try host.create(try #require(host.registry.type(named: "counter")))
        await committed(host)
        #expect(try store.load(id: created.id)?.publishedAhead == true)
        // Passivated: everything it showed is committed, and the mark goes with its release.
        clock.withLock { $0 += 61_000_000_000 }
        #expect(host.passivateIdle() == 2)
        await committed(host)
        await committed(host)
        #expect(try store.load(id: id)?.publishedAhead == false)
        #expect(try store.load(id: created.id)?.publishedAhead == false)
        // Activated again after leaving cleanly: its versions go on from where they were.
        let again = try #require(try host.instance(id: id))
        #expect(again.timeline.latest.version == 4)
    }

    @Test func aSyncHostMarksNothing() async throws {
        let batches = Locked<[[SessionWrite]]>([])
        let recording = HookedStore(store, beforeCommit: { writes in batches.withLock { $0.append(writes) } })
        let host = makeHost(store: recording, durability: .sync)
        defer { host.shutdown() }
        let (instance, ticket) = try host.create(try #require(host.registry.type(named: "counter")))
        await withCheckedContinuation { done in ticket!.whenCommitted { _ in done.resume() } }
        let (receipt, _) = try instance.send(actionJSON: Array(#""increase""#.utf8))
        await settled(instance, receipt)
        #expect(try store.load(id: instance.id)?.publishedAhead == false)
        #expect(!batches.withLock { $0 }.joined().contains { if case .publishingAhead = $0 { true } else { false } })
    }

    @Test(arguments: [false, true])
    func anAsyncHostLeavesItsSessionsUnmarkedWhenItShutsDown(watched: Bool) async throws {
        let host = makeHost(store: store, durability: .async(flushInterval: .seconds(3600)))
        let (instance, _) = try host.create(try #require(host.registry.type(named: "counter")))
        if watched { try instance.timeline.attach(Reader()) }
        let (receipt, _) = try instance.send(actionJSON: Array(#""increase""#.utf8))
        await settled(instance, receipt)
        host.shutdown()
        let stored = try #require(try store.load(id: instance.id))
        #expect(stored.version == 4)
        #expect(!stored.publishedAhead)
        // The next process resumes where this one ended, with the history a reader may resume
        // from: every version while the session had one; else only the latest, which is all
        // anybody can have seen of the commit (a resume from before it gets the latest state).
        #expect(stored.history.map(\.version) == (watched ? [0, 1, 2, 3, 4] : [0, 4]))
        let next = makeHost(store: store, durability: .async(flushInterval: .seconds(3600)))
        defer { next.shutdown() }
        let activated = try #require(try next.instance(id: instance.id))
        #expect(activated.timeline.latest.version == 4)
        #expect(activated.timeline.states(after: 1)?.map(\.version) == (watched ? [2, 3, 4] : nil))
    }

    // MARK: - Resuming past what was shown

    @Test(arguments: [Durability.sync, .async(flushInterval: .seconds(3600))])
    func aSessionLeftUncleanlyResumesPastEveryVersionItsProcessMayHaveShown(durability: Durability) async throws {
        let id = "BBBBBBBBBBBBBBBBBBBBBB"
        _ = try store.commit([
            .create(id: id, type: "counter", state: state(value: 0, isLoading: false), lastActivity: 0, publishingAhead: true),
            .version(id: id, version: 1, state: state(value: 0, isLoading: true), startedThrough: 1, producedBy: 1, lastActivity: 0),
            .version(id: id, version: 2, state: state(value: 1, isLoading: true), startedThrough: 1, producedBy: 1, lastActivity: 0),
        ])
        let host = makeHost(store: store, durability: durability)
        defer { host.shutdown() }
        let instance = try #require(try host.instance(id: id))
        // The stored state, as a version of its own past all that may have been shown.
        #expect(instance.timeline.latest.version == 2 + skip)
        #expect(instance.timeline.latest.json == state(value: 1, isLoading: true))
        // A client that saw version 2, or one after it that was never committed, gets the state.
        #expect(instance.timeline.states(after: 2) == nil)
        #expect(instance.timeline.states(after: 5) == nil)
        #expect(instance.timeline.states(after: 2 + skip)?.isEmpty == true)
        let (receipt, _) = try instance.send(actionJSON: Array(#""increase""#.utf8))
        await settled(instance, receipt)
        #expect(instance.timeline.latest.version == 6 + skip)
        await committed(host)
        let stored = try #require(try store.load(id: id))
        #expect(stored.version == 6 + skip)
        #expect(stored.history.map(\.version).contains(2 + skip))
    }

    @Test func aSessionARestoredBackupTookBackResumesPastTheVersionsTheReplacedStoreReached() async throws {
        let id = "DDDDDDDDDDDDDDDDDDDDDD"
        _ = try store.commit([
            .create(id: id, type: "counter", state: state(value: 0, isLoading: false), lastActivity: 0),
            .version(id: id, version: 1, state: state(value: 0, isLoading: true), startedThrough: 1, producedBy: 1, lastActivity: 0),
        ])
        // As a restore leaves it: the replaced store had reached version 9.
        let restored = HookedStore(
            store,
            loaded: { stored in
                stored.map {
                    var session = $0
                    session.shownThrough = 9
                    return session
                }
            })
        let host = makeHost(store: restored, durability: .sync)
        defer { host.shutdown() }
        let instance = try #require(try host.instance(id: id))
        #expect(instance.timeline.latest.version == 10)
        #expect(instance.timeline.latest.json == state(value: 0, isLoading: true))
        // A client that saw version 9 of the replaced store gets the state; one that saw the
        // backup's version 1, too: nothing replays across the skip.
        #expect(instance.timeline.states(after: 9)?.map(\.version) == [10])
        #expect(instance.timeline.states(after: 1) == nil)
        await committed(host)
        #expect(try store.load(id: id)?.version == 10)
    }

    @Test func aSecondCrashBeforeTheSkipIsCommittedSkipsToTheSameVersionWithTheSameState() async throws {
        let id = "CCCCCCCCCCCCCCCCCCCCCC"
        _ = try store.commit([
            .create(id: id, type: "counter", state: state(value: 0, isLoading: false), lastActivity: 0, publishingAhead: true),
            .version(id: id, version: 1, state: state(value: 0, isLoading: true), startedThrough: 1, producedBy: 1, lastActivity: 0),
        ])
        // The commit of the skip never happens: the store refuses every write, as a dead disk would.
        let refusing = HookedStore(
            store,
            beforeCommit: { (_: [SessionWrite]) throws(SessionStoreError) in
                throw SessionStoreError(.unavailable, "refused")
            })
        let first = makeHost(store: refusing, durability: .async(flushInterval: .seconds(3600)))
        let shown = try #require(try first.instance(id: id)).timeline.latest
        first.shutdown()
        let second = makeHost(store: store, durability: .async(flushInterval: .seconds(3600)))
        defer { second.shutdown() }
        let again = try #require(try second.instance(id: id)).timeline.latest
        #expect(shown.version == 1 + skip)
        #expect(again.version == shown.version)
        #expect(again.json == shown.json)
    }
}

/// Holds commits until the test opens it, and records each batch's size.
private final class CommitGate: Sendable {
    private let gate = DispatchSemaphore(value: 0)
    private let committing = DispatchSemaphore(value: 0)
    private let state = Locked<(isOpen: Bool, sizes: [Int])>((false, []))

    /// The sizes of the batches let through, in order.
    var commits: [Int] { state.withLock { $0.sizes } }

    /// Returns once a commit is waiting at the gate.
    func waitUntilCommitting() { committing.wait() }

    /// Lets every commit through, now and from now on.
    func open() {
        let wasOpen = state.withLock { state -> Bool in
            defer { state.isOpen = true }
            return state.isOpen
        }
        if !wasOpen { gate.signal() }
    }

    /// Called as a commit begins: waits while the gate is closed.
    func pass(_ writes: [SessionWrite]) {
        if !state.withLock({ $0.isOpen }) {
            committing.signal()
            gate.wait()
            gate.signal()
        }
        state.withLock { $0.sizes.append(writes.count) }
    }
}

/// An event stream that reads nothing: what makes a session watched.
private final class Reader: TimelineSubscriber {
    func wake() {}
    func enqueue(event: [UInt8]) {}
}
