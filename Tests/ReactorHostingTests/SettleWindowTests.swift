import Dispatch
import Locking
import Logging
import TestSupport
import Testing

@testable import ReactorHosting

/// With `sync`, a batch holding the records of actions in flight waits for them to settle
/// (`GroupCommitter.settleWindow`), so that their versions share the commit and the records are
/// never written; an action that does not settle in time is committed when the wait ends.
@Suite struct SettleWindowTests {
    /// A sync committer over a store that records each batch it is given; `waiting` is signalled
    /// each time a batch starts waiting for its actions to settle, and `timeouts` counts the waits
    /// that ended before they had. `clock`, when given, times how soon actions settle.
    private func committer(settleWindow: Duration, clock: Locked<UInt64>? = nil) -> (
        GroupCommitter, batches: Locked<[[SessionWrite]]>, waiting: DispatchSemaphore, timeouts: Locked<Int>
    ) {
        let batches = Locked<[[SessionWrite]]>([])
        let waiting = DispatchSemaphore(value: 0)
        let timeouts = Locked(0)
        let store = HookedStore(
            InMemorySessionStore(historyCapacity: 4), beforeCommit: { writes in batches.withLock { $0.append(writes) } })
        var now: @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }
        if let clock { now = { clock.withLock { $0 } } }
        let committer = GroupCommitter(
            store: store, durability: .sync, logger: Logger(label: "test"), settleWindow: settleWindow, settleClock: now,
            observer: StoreObserver(
                awaitingSettles: { _ in waiting.signal() }, settleWaitTimedOut: { _ in timeouts.withLock { $0 += 1 } }))
        return (committer, batches, waiting, timeouts)
    }

    private func version(_ number: UInt64, producedBy seq: UInt64) -> SessionWrite {
        .version(
            id: "session", version: number, state: Array("{\"value\":\(number)}".utf8), startedThrough: seq,
            producedBy: seq, lastActivity: 1)
    }

    /// Queues the record of action 1 of `session`, acknowledged once committed: `committed` is
    /// signalled then, with the outcome in `outcome`.
    private func accept(on committer: GroupCommitter, of session: QueuedSession, seq: UInt64 = 1) throws -> (
        committed: DispatchSemaphore, outcome: Locked<CommitOutcome?>
    ) {
        let ticket = try #require(
            committer.enqueueAcknowledged(.accept(id: "session", seq: seq, action: Array("\"increase\"".utf8)), of: session))
        let committed = DispatchSemaphore(value: 0)
        let outcome = Locked<CommitOutcome?>(nil)
        ticket.whenCommitted { result in
            outcome.withLock { $0 = result }
            committed.signal()
        }
        return (committed, outcome)
    }

    /// Action `seq` of `session` produces its version and settles.
    private func run(_ seq: UInt64, on committer: GroupCommitter, of session: QueuedSession) {
        committer.enqueue(version(seq, producedBy: seq), of: session)
        committer.enqueue(.settle(id: "session", seq: seq), of: session)
    }

    /// Whether `committed` stays unsignalled for 50 ms: far longer than a commit of the test's
    /// store takes, so a batch that did not wait would have been committed by then.
    private func staysUnacknowledged(_ committed: DispatchSemaphore) async -> Bool {
        await onAThreadOfItsOwn { committed.wait(timeout: .now() + .milliseconds(50)) == .timedOut }
    }

    @Test func anActionsVersionsShareTheCommitOfItsRecordWhichIsNotWritten() async throws {
        // A window far longer than the test may take: only the settle can end the wait.
        let (committer, batches, waiting, timeouts) = committer(settleWindow: .seconds(60))
        defer { committer.stop() }
        let session = QueuedSession()
        let (committed, outcome) = try accept(on: committer, of: session)
        // The action runs once the committer waits for it: its versions, then its settle.
        #expect(await wait(for: waiting))
        committer.enqueue(version(1, producedBy: 1), of: session)
        committer.enqueue(version(2, producedBy: 1), of: session)
        committer.enqueue(.settle(id: "session", seq: 1), of: session)
        #expect(await wait(for: committed))
        #expect(outcome.withLock { $0 } == .committed)
        // One commit, with the two versions only: the record and its settle cancelled out.
        let written = batches.withLock { $0 }
        #expect(written.count == 1)
        #expect(written.first?.map(\.kind) == ["version", "version"])
        #expect(timeouts.withLock { $0 } == 0)
    }

    @Test func aBatchWaitsForItsActionsLongerThanTheLastCommitTook() async throws {
        // A window far longer than the test may take; the store commits in microseconds.
        let (committer, batches, waiting, timeouts) = committer(settleWindow: .seconds(60))
        defer { committer.stop() }
        let session = QueuedSession()
        let first = try accept(on: committer, of: session, seq: 1)
        #expect(await wait(for: waiting))
        run(1, on: committer, of: session)
        #expect(await wait(for: first.committed))
        // Action 2 settles thousands of times later than that commit took: its batch still
        // waits for it, and nothing is acknowledged before it has settled.
        let second = try accept(on: committer, of: session, seq: 2)
        #expect(await wait(for: waiting))
        #expect(await staysUnacknowledged(second.committed))
        run(2, on: committer, of: session)
        #expect(await wait(for: second.committed))
        #expect(second.outcome.withLock { $0 } == .committed)
        // Each action's version shares the commit its record would have had; no record is written.
        #expect(batches.withLock { $0 }.map { $0.map(\.kind) } == [["version"], ["version"]])
        #expect(timeouts.withLock { $0 } == 0)
    }

    @Test func anActionQueuedDuringTheWaitIsWaitedForToo() async throws {
        let (committer, batches, waiting, timeouts) = committer(settleWindow: .seconds(60))
        defer { committer.stop() }
        let session = QueuedSession()
        let first = try accept(on: committer, of: session, seq: 1)
        #expect(await wait(for: waiting))
        // Action 2 arrives while the batch waits for action 1, which then settles.
        let second = try accept(on: committer, of: session, seq: 2)
        run(1, on: committer, of: session)
        // The batch now waits for action 2: neither action is acknowledged before it settles.
        #expect(await staysUnacknowledged(first.committed))
        run(2, on: committer, of: session)
        #expect(await wait(for: first.committed))
        #expect(await wait(for: second.committed))
        // One commit, with the two versions only: both records cancelled out.
        #expect(batches.withLock { $0 }.map { $0.map(\.kind) } == [["version", "version"]])
        #expect(timeouts.withLock { $0 } == 0)
    }

    @Test func anActionThatDoesNotSettleIsCommittedWhenTheWindowEnds() async throws {
        let (committer, batches, waiting, timeouts) = committer(settleWindow: .milliseconds(20))
        defer { committer.stop() }
        let (committed, outcome) = try accept(on: committer, of: QueuedSession())
        // Nothing settles it: the record is committed alone once the wait ends.
        #expect(await wait(for: waiting))
        #expect(await wait(for: committed))
        #expect(outcome.withLock { $0 } == .committed)
        #expect(batches.withLock { $0 }.map { $0.map(\.kind) } == [["accept"]])
        #expect(timeouts.withLock { $0 } == 1)
    }

    @Test func aSessionWhoseActionSettledLateIsNotWaitedForUntilOneSettlesInTime() async throws {
        // Times how soon actions settle; the wait itself is bounded by the real window.
        let clock = Locked<UInt64>(0)
        let (committer, batches, waiting, _) = committer(settleWindow: .milliseconds(20), clock: clock)
        defer { committer.stop() }
        let session = QueuedSession()
        let first = try accept(on: committer, of: session, seq: 1)
        #expect(await wait(for: waiting))
        #expect(await wait(for: first.committed))
        // Committed once the wait for it ended; it settles later than the window.
        clock.withLock { $0 += 21_000_000 }
        committer.enqueue(.settle(id: "session", seq: 1), of: session)
        let second = try accept(on: committer, of: session, seq: 2)
        #expect(await wait(for: second.committed))
        // Action 2's record was committed without a wait for it.
        #expect(waiting.wait(timeout: .now()) == .timedOut)
        #expect(batches.withLock { $0 }.flatMap { $0.map(\.kind) } == ["accept", "settle", "accept"])
        // It settles within the window (no time passed): the session's next action is waited for again.
        committer.enqueue(.settle(id: "session", seq: 2), of: session)
        _ = try accept(on: committer, of: session, seq: 3)
        #expect(await wait(for: waiting))
    }
}

extension SessionWrite {
    /// The case's name, to compare batches by.
    fileprivate var kind: String {
        switch self {
        case .create: "create"
        case .accept: "accept"
        case .settle: "settle"
        case .attempt: "attempt"
        case .version: "version"
        case .touch: "touch"
        case .delete: "delete"
        case .release: "release"
        case .publishingAhead: "publishingAhead"
        }
    }
}
