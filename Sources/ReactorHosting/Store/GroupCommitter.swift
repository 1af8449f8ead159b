import Dispatch
import Locking
import Logging
import ReactorCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Commits session writes on a thread of its own, in batches: everything queued while one
/// commit runs goes into the next, as one transaction with one sync to disk (group commit).
///
/// With ``Durability/sync``, each write's completion runs after its batch commits, in the order
/// the writes were queued; that is when an action is acknowledged and a state published. With
/// ``Durability/async`` completions run at once and the thread commits every flush interval,
/// except for a write that must reach the store before its session shows more
/// (``enqueueHeld(_:)``) and those queued past ``queuedAheadLimit``: they wait for their commit,
/// and the session's writes queued meanwhile wait with them. With ``Durability/async`` the record
/// of an action in flight when a batch is taken, queued in the last quarter of the interval, may
/// wait for the next batch (``QueuedBatch``), which is then taken that much sooner: no write waits
/// longer than before, and most such actions settle meanwhile, so their records are never written.
/// With ``Durability/async`` a session's versions also wait in its ``LatestVersionSlot`` rather
/// than in the queue, which drops there those the store would not keep; the batch takes the rest.
///
/// With ``Durability/sync``, a batch that holds the records of actions still in flight waits a
/// moment before it is taken (``settleWindow`` at most) for those actions to settle, and for
/// those whose records are queued meanwhile: then the versions they produce go into the same
/// commit, and their records are not written at all (see ``QueuedBatch``). An action that takes
/// longer is committed as a record when the wait ends, and the next actions of its session are
/// not waited for until one of them settles within the window.
///
/// When a commit fails (a full disk, a store gone away), with ``Durability/sync`` the whole batch
/// fails: completions hear `false` (nothing of it was acknowledged), and the instances it touched
/// are dropped from memory (``failedInstances``), so that memory never runs ahead of the store;
/// their next request loads them as last committed. With ``Durability/async`` the batch's writes
/// were acknowledged already: the thread keeps them, and tries the same batch again every
/// ``retryPause`` until the store takes it; only a damaged store, or stopping, gives them up (and
/// drops their instances as above). Either way, for ``retryPause`` after a failure ``lastError``
/// is set and new work should be refused; service resumes once a commit succeeds.
package final class GroupCommitter: Sendable {
    private struct Queue {
        var writes: QueuedBatch
        /// Each with the session its write is about (nil: it waits for the whole batch), so a
        /// write the store refused as stale is not reported committed.
        var completions: [(id: String?, body: CommitCompletion)] = []
        /// Run after the next commit in either durability (see `afterCommit`).
        var afterCommit: [@Sendable () -> Void] = []
        var isSleeping = false
        /// With ``Durability/sync``: the thread waits for the actions of the batch's records to
        /// settle (see ``settleWindow``), and is woken once they all have.
        var isAwaitingSettles = false
        var isStopping = false
        var lastError: SessionStoreError?
        var failedAt: UInt64 = 0
        /// Sessions whose instances are being dropped after a failed or overtaken commit: their
        /// writes are refused meanwhile (see `drop`).
        var fenced: Set<String> = []
        /// The number of the batch being queued; the one before it may be committing.
        var queuedBatch: UInt64 { writes.number }
        /// With ``Durability/async``: each session with a write that waits for its commit (see
        /// ``enqueueHeld(_:)``), and the batch of its last such write. Its writes queued until
        /// that batch is committed wait for that commit (not their own), so that what an instance
        /// shows stays in order. Entries of committed batches are dropped after each commit.
        var held: [String: UInt64] = [:]
        /// With ``Durability/async``: completions of writes queued after the batch being
        /// committed (`queuedBatch - 1`), which hold them; run once it is.
        var afterCommitting: [(id: String?, body: CommitCompletion)] = []
        /// With ``Durability/async``: the thread was woken to commit before its flush interval
        /// ends (for writes that wait), and has not yet taken the queue.
        var commitSoon = false
        /// With ``Durability/async``: the sessions whose ``LatestVersionSlot`` was filled for the
        /// batch being queued, each once; their slots are emptied into it as it is taken.
        var slotted: [QueuedSession] = []
    }

    /// With ``Durability/async``, a write is acknowledged at once only while fewer writes than
    /// this are queued; past it, writes wait for their commit as with ``Durability/sync``. So a
    /// store that falls behind slows the clients down instead of growing the queue without end.
    package static let queuedAheadLimit = 32_768

    /// The most versions of one session that a process with ``Durability/async`` can have shown
    /// and not committed: those queued (under ``queuedAheadLimit``) and those of the batch being
    /// committed. A session that such a process did not leave cleanly resumes its versions past
    /// this many (``StoredSession/publishedAhead``), so a version number is never shown with two
    /// different states.
    package static let versionsShownAheadLimit: UInt64 = 2 * UInt64(queuedAheadLimit)

    private let store: any SessionStore
    package let durability: Durability
    /// How long new work is refused after a failed commit, before writes are tried again.
    package let retryPause: Duration
    /// With ``Durability/sync``: the longest a batch waits, before it is taken, for the actions
    /// whose records it holds to settle, so that their versions share their commit.
    ///
    /// The wait is not cut to how long the last commit took. Where the commit thread shares a
    /// core with the threads that apply the actions, those actions settle late because they wait
    /// for the processor, not for anything slow; committing their records without them costs
    /// more than the wait (each record is written, then deleted a commit later, and the versions
    /// take a commit of their own). Actions that wait on something else (a timer, another
    /// service) are not waited for past the window anyway (see ``QueuedBatch``).
    package let settleWindow: Duration
    private let queue: Locked<Queue>
    /// Whether `Queue.lastError` is set: read without the lock by every action (``lastError``),
    /// set and cleared under it.
    private let hasFailed = Atomic<Bool>(false)
    private let wake = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)
    private let logger: Logger
    /// Told of ids whose version writes a newer writer had overtaken.
    private let staleWriters: @Sendable (Set<String>) -> Void
    /// Told of the ids a failed batch touched.
    private let failedInstances: @Sendable (Set<String>) -> Void
    /// Told of each commit, for metrics.
    private let observer: StoreObserver
    /// With ``Durability/async``: whether no session's writes wait for a commit (`Queue.held` is
    /// empty), read without the lock by ``offer(_:to:origin:startedThrough:lastActivity:)``:
    /// while one does, versions are queued, not replaced in their slots.
    private let slotsOpen = Atomic<Bool>(true)
    /// With ``Durability/async``: how many writes the batch being queued holds (its
    /// `QueuedBatch.count`), stored under the lock, read without it.
    private let queuedWriteCount = Atomic<Int>(0)
    /// With ``Durability/async``: the versions put in slots since the batch being queued was
    /// started, shown at once like queued writes, so counted with them against
    /// ``queuedAheadLimit``.
    private let slottedVersions = Atomic<Int>(0)

    /// Starts the committing thread. `settleClock` (monotonic nanoseconds) times how soon a
    /// session's actions settle (see ``settleWindow``).
    package init(
        store: any SessionStore, durability: Durability, logger: Logger, retryPause: Duration = .seconds(1),
        settleWindow: Duration = .milliseconds(1),
        settleClock: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds },
        observer: StoreObserver = StoreObserver(),
        staleWriters: @escaping @Sendable (Set<String>) -> Void = { _ in },
        failedInstances: @escaping @Sendable (Set<String>) -> Void = { _ in }
    ) {
        self.store = store
        self.observer = observer
        self.durability = durability
        self.logger = logger
        self.retryPause = retryPause
        self.settleWindow = settleWindow
        let timing = durability == .sync ? SettleTiming(window: settleWindow.nanoseconds, now: settleClock) : nil
        queue = Locked(Queue(writes: QueuedBatch(number: 1, settleTiming: timing)))
        self.staleWriters = staleWriters
        self.failedInstances = failedInstances
        var error: Int32 = 0
        guard startDetachedThread(named: "rs-commit", { [self] in run() }, error: &error) else {
            fatalError("could not start the session store's commit thread (error \(error))")
        }
    }

    /// The error of the last failed commit, for ``retryPause`` after it: new work should then be
    /// refused. Nil otherwise.
    package var lastError: SessionStoreError? {
        guard hasFailed.load(ordering: .acquiring) else { return nil }
        return queue.withLock { queue in
            guard let error = queue.lastError else { return nil }
            if DispatchTime.now().uptimeNanoseconds &- queue.failedAt >= retryPause.nanoseconds {
                return nil
            }
            return error
        }
    }

    /// Queues `write`; `completion` hears whether it was committed, once it was
    /// (``Durability/sync``), or ``CommitOutcome/committed`` at once (``Durability/async``, unless
    /// the write must wait: see ``queuedAheadLimit`` and ``enqueueHeld(_:)``).
    /// `session`, given by the session's hosted instance, lets the batch leave out what a later
    /// write of the session makes needless (see ``QueuedBatch``).
    package func enqueue(
        _ write: SessionWrite, of session: QueuedSession? = nil, completion: (@Sendable (CommitOutcome) -> Void)? = nil
    ) {
        enqueue(.ready(write), of: session, awaitingCommit: isSync, completion: completion.map(CommitCompletion.body))
    }

    /// Queues a published state, encoded by the commit thread if its batch keeps it (see
    /// ``PendingVersion``); the version hears of its commit (``PendingVersion/committed(_:)``) as a
    /// completion does in ``enqueue(_:of:completion:)``.
    package func enqueue(_ version: any PendingVersion, of session: QueuedSession? = nil) {
        enqueue(.version(version), of: session, awaitingCommit: isSync, completion: .version(version))
    }

    /// Queues `write` and returns the ticket a reply waits on before it acknowledges the write;
    /// nil when it may be acknowledged at once (``Durability/async``, unless the write must wait,
    /// and not `inAnyDurability`). The record of an action acknowledged at once may then wait
    /// for the batch after its own (see ``QueuedBatch``).
    package func enqueueAcknowledged(_ write: SessionWrite, of session: QueuedSession? = nil, inAnyDurability: Bool = false)
        -> CommitTicket?
    {
        enqueue(
            .ready(write), of: session, awaitingCommit: isSync || inAnyDurability, completion: nil, ticketIfWaiting: true,
            mayCarryOver: true
        ).ticket
    }

    /// Queues `write` so that, in either durability, nothing the session writes after it is
    /// acknowledged or shown before it is committed: what a session must have in the store before
    /// it shows anything (see ``StoredSession/publishedAhead``). With ``Durability/async`` the
    /// commit thread is woken for it.
    package func enqueueHeld(_ write: SessionWrite) {
        enqueue(.ready(write), of: nil, awaitingCommit: true, completion: nil)
    }

    private var isSync: Bool {
        if case .sync = durability { return true }
        return false
    }

    /// Whether versions are shown before they are committed (``Durability/async``).
    package var publishesAhead: Bool { !isSync }

    /// Queues `write`; `completion` hears of its commit once it happened when `awaitingCommit`
    /// (or, with ``Durability/async``, when the write must wait), else ``CommitOutcome/committed``
    /// at once.
    /// With `ticketIfWaiting` (and no `completion`), a write that waits gets a ticket, made only
    /// then: one acknowledged at once needs none.
    /// With `mayCarryOver`, the record of a new action that turns out acknowledged at once may
    /// wait for the batch after its own (see `QueuedBatch.carryOver`). Not a record written again
    /// (an action renumbered at activation): its old number's record is deleted in the batch it
    /// is queued in, and both must be committed together.
    /// - Returns: whether the write waits for its commit, and its ticket.
    @discardableResult
    private func enqueue(
        _ write: QueuedWrite, of session: QueuedSession?, awaitingCommit: Bool, completion: CommitCompletion?,
        ticketIfWaiting: Bool = false, mayCarryOver: Bool = false
    ) -> (waits: Bool, ticket: CommitTicket?) {
        let isSync = self.isSync
        var isFull = false
        var ticket: CommitTicket?
        // When the record was queued, to bound how long it may wait.
        let queuedAt: UInt64? =
            if mayCarryOver, !isSync, !awaitingCommit, case .ready(.accept) = write {
                DispatchTime.now().uptimeNanoseconds
            } else {
                nil
            }
        /// The completion to keep for a write that waits.
        func waiting() -> CommitCompletion? {
            if let completion { return completion }
            guard ticketIfWaiting else { return nil }
            let made = CommitTicket()
            ticket = made
            return .ticket(made)
        }
        let (waits, signal, refused) = queue.withLock { queue -> (Bool, Bool, Bool) in
            let id = write.instanceID
            if queue.fenced.contains(id) || session?.isDropped == true { return (true, false, true) }
            if !isSync, placeInSlot(write, of: session, awaitingCommit: awaitingCommit, in: &queue) {
                return (false, false, false)
            }
            let isCarryable =
                queuedAt != nil && queue.writes.count < Self.queuedAheadLimit && (queue.held.isEmpty || queue.held[id] == nil)
            queue.writes.append(write, of: session, carryableSince: isCarryable ? queuedAt : nil)
            if isSync {
                let settlesAwaited = settlesArrived(&queue)
                guard awaitingCommit else { return (false, settlesAwaited, false) }
                if let completion = waiting() { queue.completions.append((id, completion)) }
                return (true, wakeIfSleeping(&queue) || settlesAwaited, false)
            }
            queuedWriteCount.store(queue.writes.count, ordering: .relaxed)
            // Async: at once, unless asked to wait or the queue is full; then after its commit.
            isFull = shownAhead(queued: queue.writes.count) > Self.queuedAheadLimit
            if awaitingCommit || isFull {
                queue.held[id] = queue.queuedBatch
                slotsOpen.store(false, ordering: .releasing)
                queue.completions.append((id, waiting() ?? .body { _ in }))
                return (true, commitSoon(&queue), false)
            }
            // After the commit of an earlier write of its session that waits, if any: what the
            // session shows stays in order.
            guard !queue.held.isEmpty, let holding = queue.held[id] else { return (false, false, false) }
            let body = waiting() ?? .body { _ in }
            if holding == queue.queuedBatch {
                queue.completions.append((id, body))
            } else {
                queue.afterCommitting.append((id, body))
            }
            return (true, false, false)
        }
        if signal { wake.signal() }
        if isFull { observer.queueFull() }
        if refused {
            (completion ?? waiting())?(.failed)
            return (true, ticket)
        }
        if !waits { completion?(.committed) }
        return (waits, ticket)
    }

    /// With ``Durability/async``, puts a session's new version in its slot for the batch being
    /// queued (see ``LatestVersionSlot``) without the queue's lock: when the slot already holds
    /// versions and has room, nobody was watching the session when its last version was shown,
    /// no session's writes wait for a commit and the queue has room. Returns false, changing
    /// nothing, otherwise: then the version is queued (``enqueue(_:of:)-(any PendingVersion,_)``).
    func offer<State>(
        _ state: State, to slot: VersionSlot<State>, origin: VersionOrigin, startedThrough: UInt64, lastActivity: Int64
    ) -> Bool {
        guard slotsOpen.load(ordering: .acquiring),
            shownAhead(queued: queuedWriteCount.load(ordering: .relaxed)) < Self.queuedAheadLimit,
            !slot.lastShownWatched.load(ordering: .relaxed),
            slot.offer(state, origin: origin, startedThrough: startedThrough, lastActivity: lastActivity)
        else { return false }
        slottedVersions.wrappingAdd(1, ordering: .relaxed)
        return true
    }

    /// Async, under the lock: keeps the session's slot in order with `write`. A version goes
    /// after the one the slot holds, and into the slot itself when it would be shown at once
    /// (returns true: it is not queued); a settle lets the slot's version be replaced; a write
    /// queued without its session goes after the version its session's slot holds.
    private func placeInSlot(
        _ write: QueuedWrite, of session: QueuedSession?, awaitingCommit: Bool, in queue: inout Queue
    ) -> Bool {
        switch write {
        case .version(let pending):
            guard let session, let slot = session.slot else { return false }
            emptySlot(of: session, into: &queue)
            guard !awaitingCommit, queue.held[pending.id] == nil,
                shownAhead(queued: queue.writes.count) < Self.queuedAheadLimit, !pending.hasReaders
            else { return false }
            slot.fill(with: pending)
            if session.slottedIn != queue.queuedBatch {
                session.slottedIn = queue.queuedBatch
                queue.slotted.append(session)
            }
            slottedVersions.wrappingAdd(1, ordering: .relaxed)
            return true
        case .ready(.settle(_, let seq)):
            session?.slot?.settled(seq)
            return false
        case .ready(let untracked):
            if session == nil {
                for slotted in queue.slotted where slotted.slot?.id == untracked.instanceID {
                    emptySlot(of: slotted, into: &queue)
                }
            }
            return false
        }
    }

    /// Async: what is shown ahead of the store from the batch being queued, which holds `queued`
    /// writes: those and the versions put in slots since it was started (see ``queuedAheadLimit``).
    private func shownAhead(queued: Int) -> Int {
        queued + slottedVersions.load(ordering: .relaxed)
    }

    /// Under the lock: queues the version the session's slot holds, if any.
    private func emptySlot(of session: QueuedSession, into queue: inout Queue) {
        guard let slot = session.slot else { return }
        for (version, settled) in slot.take() { queue.writes.append(.version(version), of: session, settled: settled) }
    }

    /// Runs `body` once everything queued so far is committed or has failed, with the outcome
    /// of the commit that took it (at once, ``CommitOutcome/committed``, with
    /// ``Durability/async`` while no write waits).
    package func afterQueuedWrites(_ body: @escaping @Sendable (CommitOutcome) -> Void) {
        let isSync = self.isSync
        let (now, signal) = queue.withLock { queue -> (Bool, Bool) in
            // Async: at once, unless writes wait, whose states are shown once committed.
            if !isSync && queue.held.isEmpty { return (true, false) }
            queue.completions.append((nil, .body(body)))
            return (false, isSync ? wakeIfSleeping(&queue) : commitSoon(&queue))
        }
        if signal { wake.signal() }
        if now { body(.committed) }
    }

    /// Runs `body` on the commit thread once everything queued so far has been committed (or
    /// its commit failed), in either durability: for what must not happen before the store has
    /// the writes, such as letting an instance leave memory.
    package func afterCommit(_ body: @escaping @Sendable () -> Void) {
        queue.withLock { queue in
            queue.afterCommit.append(body)
            queue.isSleeping = false
        }
        // Always: with async durability the thread may be waiting out its flush interval.
        wake.signal()
    }

    /// Commits what is queued, then ends the thread. Returns once it has.
    package func stop() {
        queue.withLock { $0.isStopping = true }
        wake.signal()
        stopped.wait()
    }

    private func wakeIfSleeping(_ queue: inout Queue) -> Bool {
        guard queue.isSleeping else { return false }
        queue.isSleeping = false
        return true
    }

    /// Sync: whether to wake the thread because the actions it waits on have all settled.
    private func settlesArrived(_ queue: inout Queue) -> Bool {
        guard queue.isAwaitingSettles, queue.writes.awaitedAccepts == 0 else { return false }
        queue.isAwaitingSettles = false
        return true
    }

    /// Sync: waits, before the queued batch is taken, until the actions whose records it holds
    /// have settled, those whose records were queued during the wait included, or `limit`
    /// nanoseconds have passed (see ``settleWindow``). Once the actions it waited for have
    /// settled, it waits again, within what is left of `limit`, for those queued meanwhile: under
    /// load the thread often starts waiting while the connections' next actions are still being
    /// read, and their records would otherwise be written, and deleted a commit later.
    /// - Returns: whether it waited at all (false: the batch held no such record when it looked).
    private func awaitSettles(forAtMost limit: UInt64) -> Bool {
        let deadline = DispatchTime.now().uptimeNanoseconds &+ limit
        var isFirst = true
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            // Records queued after the window ended are not waited for.
            if !isFirst && now >= deadline { return true }
            let awaited = queue.withLock { queue -> Int in
                guard !queue.isStopping else { return 0 }
                let awaited = queue.writes.awaitSettles()
                queue.isAwaitingSettles = awaited > 0
                return awaited
            }
            guard awaited > 0 else { return !isFirst }
            if isFirst { observer.awaitingSettles(awaited) }
            isFirst = false
            _ = wake.wait(timeout: .now() + .nanoseconds(Int(clamping: deadline &- min(now, deadline))))
            let unsettled = queue.withLock { queue -> Int in
                queue.isAwaitingSettles = false
                return queue.writes.awaitedAccepts
            }
            if unsettled > 0 {
                observer.settleWaitTimedOut(unsettled)
                return true
            }
        }
    }

    /// Async: whether to wake the thread so that it commits without waiting out its flush
    /// interval (once per batch it takes).
    private func commitSoon(_ queue: inout Queue) -> Bool {
        guard !queue.commitSoon else { return false }
        queue.commitSoon = true
        queue.isSleeping = false
        return true
    }

    /// What the thread takes from the queue for one commit: the writes, their completions, what
    /// runs after the commit, whether the committer is stopping, the batch's number, and (async)
    /// when the oldest record carried over into the next batch was queued.
    private typealias TakenBatch = (
        QueuedBatch, [(id: String?, body: CommitCompletion)], [@Sendable () -> Void], Bool, UInt64, UInt64?
    )

    private func run() {
        /// With async: when the oldest record carried over into the queued batch was queued, and
        /// when that batch's predecessor was taken.
        var carried: (since: UInt64, takenAt: UInt64)?
        while true {
            let awaitedSettles = isSync && awaitSettles(forAtMost: settleWindow.nanoseconds)
            if case .async(let interval) = durability, !queue.withLock({ $0.isStopping }) {
                // A carried record waits no longer in all than one queued just after a take.
                let waited = carried.map { $0.takenAt &- $0.since } ?? 0
                let wait = interval.nanoseconds &- min(waited, interval.nanoseconds)
                _ = wake.wait(timeout: .now() + .nanoseconds(Int(clamping: wait)))
            }
            let takenAt = DispatchTime.now().uptimeNanoseconds
            let next = queue.withLock { queue -> TakenBatch? in
                // Sync: a record of an action in flight queued after the thread found none to
                // wait for is waited for as if it had come a moment later, when the thread slept.
                if isSync, !awaitedSettles, !queue.isStopping, queue.writes.unsettledAccepts > 0 { return nil }
                // The versions the batch's sessions keep in their slots go into it now.
                for session in queue.slotted { emptySlot(of: session, into: &queue) }
                queue.slotted.removeAll(keepingCapacity: true)
                let number = queue.queuedBatch
                // Swapped out first, so that the taken batch is the only reference to its writes and
                // carrying records over edits them in place instead of copying them all.
                var writes = queue.writes
                queue.writes = QueuedBatch(
                    number: number + 1, reservingCapacity: Self.room(after: writes.count), settleTiming: writes.settleTiming)
                var carriedSince: UInt64?
                // Only from a batch that nothing waits on as a whole: its records of actions in
                // flight, queued in the last quarter of the interval, may wait for the next one.
                if case .async(let interval) = durability, !queue.isStopping, queue.completions.isEmpty,
                    queue.afterCommit.isEmpty
                {
                    carriedSince = writes.carryOver(queuedSince: takenAt &- interval.nanoseconds / 4, into: &queue.writes)
                }
                queuedWriteCount.store(queue.writes.count, ordering: .relaxed)
                slottedVersions.store(0, ordering: .relaxed)
                let taken = (writes, queue.completions, queue.afterCommit, queue.isStopping, number, carriedSince)
                queue.completions = []
                queue.completions.reserveCapacity(Self.room(after: taken.1.count))
                queue.afterCommit = []
                queue.commitSoon = false
                if taken.0.isEmpty && taken.1.isEmpty && taken.2.isEmpty && !queue.isStopping { queue.isSleeping = true }
                return taken
            }
            guard let (queued, completions, afterCommit, stopping, batch, carriedSince) = next else { continue }
            carried = carriedSince.map { ($0, takenAt) }
            if queued.isEmpty && completions.isEmpty && afterCommit.isEmpty {
                if !isSync { settleHeld(through: batch, outcome: (true, [])) }
                if stopping { break }
                if case .sync = durability { wake.wait() }
                continue
            }
            // Encoded here, off the threads that apply actions.
            let writes = queued.taken()
            let outcome = writes.isEmpty ? (committed: true, refused: []) : commit(writes, of: queued.trackedSessions)
            // The answers and states of the batch resume connections: their event loops are
            // woken once each, after the last, rather than once per answer.
            WakeUpBatch.collecting {
                for completion in completions { completion.body(Self.outcome(of: completion.id, in: outcome)) }
                if !isSync { settleHeld(through: batch, outcome: outcome) }
                for body in afterCommit { body() }
            }
        }
        stopped.signal()
    }

    /// Room to reserve for the next batch's writes, or its completions, after a batch that had
    /// `count`: half as many again, so that a batch a little larger than the one before does not
    /// grow the array while it is queued. Each growth copies the array, and on the threads that
    /// queue an allocation this large also makes the allocator consolidate its free lists.
    private static func room(after count: Int) -> Int { count + count / 2 }

    private static func outcome(of id: String?, in batch: (committed: Bool, refused: Set<String>)) -> CommitOutcome {
        if !batch.committed { return .failed }
        if let id, batch.refused.contains(id) { return .overtaken }
        return .committed
    }

    /// Async, once `batch` is committed (or failed): runs the completions its waiting writes
    /// held, then lets their sessions' writes go at once again. Until it has, later writes of
    /// those sessions still join the held ones, so none is shown before them.
    private func settleHeld(through batch: UInt64, outcome: (committed: Bool, refused: Set<String>)) {
        while true {
            let held = queue.withLock { queue -> [(id: String?, body: CommitCompletion)] in
                let held = queue.afterCommitting
                queue.afterCommitting = []
                if held.isEmpty, !queue.held.isEmpty {
                    queue.held = queue.held.filter { $0.value > batch }
                    slotsOpen.store(queue.held.isEmpty, ordering: .releasing)
                }
                return held
            }
            if held.isEmpty { return }
            for completion in held { completion.body(Self.outcome(of: completion.id, in: outcome)) }
        }
    }

    /// Commits one batch; on failure reports it and, unless it tries again (async: see the
    /// type's description), has the instances it touched dropped.
    /// - Returns: whether it was committed, and the sessions whose writes the store refused as stale.
    /// `sessions`: those whose instances queued writes of the batch with their ``QueuedSession``.
    private func commit(_ writes: [SessionWrite], of sessions: [QueuedSession]) -> (committed: Bool, refused: Set<String>) {
        while true {
            if let outcome = commitOnce(writes, of: sessions) { return outcome }
        }
    }

    /// One try of ``commit(_:of:)``; nil when the batch is to be tried again.
    private func commitOnce(_ writes: [SessionWrite], of sessions: [QueuedSession]) -> (committed: Bool, refused: Set<String>)? {
        let started = DispatchTime.now().uptimeNanoseconds
        do {
            let stale = try store.commit(writes)
            observer.committed(writes.count, DispatchTime.now().uptimeNanoseconds &- started)
            if !stale.isEmpty { drop(stale, outcome: .overtaken, by: staleWriters) }
            let recovered = queue.withLock { queue -> Bool in
                defer {
                    queue.lastError = nil
                    hasFailed.store(false, ordering: .releasing)
                }
                return queue.lastError != nil
            }
            if recovered { logger.notice("session store writable again; commits resume") }
            return (true, stale)
        } catch {
            observer.commitFailed()
            let first = queue.withLock { queue -> Bool in
                defer {
                    queue.lastError = error
                    queue.failedAt = DispatchTime.now().uptimeNanoseconds
                    hasFailed.store(true, ordering: .releasing)
                }
                return queue.lastError == nil
            }
            let metadata: Logger.Metadata = ["error": "\(error)", "writes": "\(writes.count)"]
            if error.kind == .corrupt {
                logger.critical(
                    "the session store is damaged: a commit failed and was not acknowledged; stop the server and restore the store from a backup",
                    metadata: metadata)
            } else if !isSync {
                if first {
                    logger.error(
                        "session store commit failed: its writes, acknowledged already (async durability), are kept and tried again every \(retryPause); new work is refused meanwhile",
                        metadata: metadata)
                }
                if pauseBeforeRetrying() { return nil }
                logger.error(
                    "stopping while the session store fails: writes acknowledged (async durability) but never committed are lost",
                    metadata: metadata)
            } else if first {
                logger.error(
                    "session store commit failed: the batch was not acknowledged; new work is refused for a while", metadata: metadata)
            }
            drop(Set(writes.map(\.instanceID)), outcome: .failed, by: failedInstances, sessions: sessions)
            return (false, [])
        }
    }

    /// Whether `session`'s instance was dropped after a failed commit (see `drop`): it must
    /// leave memory, and nothing it queues is committed.
    package func hasDropped(_ session: QueuedSession) -> Bool {
        queue.withLock { _ in session.isDropped }
    }

    /// Waits ``retryPause`` before a failed batch is tried again. False when the committer is
    /// stopping, which tries nothing again.
    private func pauseBeforeRetrying() -> Bool {
        let deadline = DispatchTime.now() + .nanoseconds(Int(clamping: retryPause.nanoseconds))
        while !queue.withLock({ $0.isStopping }) {
            // Woken early by new writes (and by stop): only the deadline or stopping ends the pause.
            if wake.wait(timeout: deadline) == .timedOut { return !queue.withLock { $0.isStopping } }
        }
        return false
    }

    /// Has the instances of `ids` dropped by `dropping`, with nothing more of theirs committed:
    /// the writes they queued after the batch that failed (a version of an action whose record
    /// was in it) are taken out of the queue and fail, and their writes are refused until they
    /// have left memory. Otherwise a refused action's effect could still reach the store.
    /// `sessions` are marked dropped for good: what their instances queue later (an action's
    /// settle, which the reactor's thread may queue after the instance left the table, or an
    /// instance still being activated, which the table does not hold yet) is refused too.
    private func drop(
        _ ids: Set<String>, outcome: CommitOutcome, by dropping: @Sendable (Set<String>) -> Void, sessions: [QueuedSession] = []
    ) {
        let purged = queue.withLock { queue -> [CommitCompletion] in
            queue.fenced.formUnion(ids)
            for session in sessions { session.isDropped = true }
            queue.writes.leaveOut(ids)
            for session in queue.slotted {
                if let slot = session.slot, ids.contains(slot.id) { slot.clear() }
            }
            var purged: [CommitCompletion] = []
            queue.completions.removeAll { completion in
                guard let id = completion.id, ids.contains(id) else { return false }
                purged.append(completion.body)
                return true
            }
            queue.afterCommitting.removeAll { completion in
                guard let id = completion.id, ids.contains(id) else { return false }
                purged.append(completion.body)
                return true
            }
            for id in ids { queue.held[id] = nil }
            slotsOpen.store(queue.held.isEmpty, ordering: .releasing)
            return purged
        }
        for completion in purged { completion(outcome) }
        dropping(ids)
        queue.withLock { $0.fenced.subtract(ids) }
    }
}
