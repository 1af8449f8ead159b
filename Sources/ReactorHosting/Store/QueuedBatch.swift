/// The writes queued for the ``GroupCommitter``'s next commit, with what a later write of the
/// same session makes needless left out as it is queued, so that the commit thread takes a batch
/// already reduced and never sorts it by session:
/// - an action accepted and settled within the batch is not written at all (unless the client
///   sent an idempotency key with it, which the store keeps past the settle);
/// - a version followed by a later one of its session is left out when nobody watches the
///   session and the action that produced it (if any) has settled within the batch: the rule of
///   ``PendingVersion``.
///
/// Only writes queued with their session's ``QueuedSession`` are matched; any other is kept as it is.
///
/// With ``Durability/sync``, the batch counts the records of actions that have not settled in it
/// (``awaitedAccepts``), for the committer to wait for them (``GroupCommitter/settleWindow``):
/// only those of sessions whose last action settled within the window of its record being queued,
/// so that a session whose actions take longer (a `mutate` that calls another service) does not
/// make each of its acknowledgements wait in vain.
///
/// With ``Durability/async``, the record of an action acknowledged at once that had not started
/// by its session's last version in the batch may wait for the next batch
/// (``carryOver(queuedSince:into:)``): most such actions settle before then, and their record is
/// then never written, nor deleted a commit later.
struct QueuedBatch {
    /// The writes in the order queued; nil where one was left out.
    private(set) var writes: [QueuedWrite?] = []
    /// The batch's number: a ``QueuedSession`` holds what it knows of one batch only.
    let number: UInt64
    /// The sessions with writes in the batch, each once: where records to carry over are found.
    private var sessions: [QueuedSession] = []
    /// Whether a write was queued without its session: the batch then carries nothing over, as
    /// such a write (a release, a delete) may need the session's records committed before it.
    private var hasUntrackedWrites = false
    /// With ``Durability/sync``, how the batch tells whether a session's actions settle soon
    /// enough for a commit to wait for them; nil: it waits for none.
    let settleTiming: SettleTiming?
    /// The records in the batch of actions that have not settled in it and that a commit may wait
    /// for (see ``settleTiming``; those queued with their session and no idempotency key, which a
    /// settle in the batch leaves out).
    private(set) var unsettledAccepts = 0
    /// Of the records queued before ``awaitSettles()`` was last called, how many have not settled
    /// in the batch since.
    private(set) var awaitedAccepts = 0
    /// How many writes the batch held when ``awaitSettles()`` was last called.
    private var awaitedBefore = 0

    /// An empty batch numbered `number`, with room for `capacity` writes (more than the batch
    /// before it had, so that queuing rarely grows the array), counting the records to wait for
    /// under `settleTiming` (see ``settleTiming``).
    init(number: UInt64, reservingCapacity capacity: Int = 0, settleTiming: SettleTiming? = nil) {
        self.number = number
        self.settleTiming = settleTiming
        writes.reserveCapacity(capacity)
    }

    /// How many writes were queued, including those left out since.
    var count: Int { writes.count }

    var isEmpty: Bool { writes.isEmpty }

    /// The sessions with writes queued with them in the batch, each once.
    var trackedSessions: [QueuedSession] { sessions }

    /// Queues `write`, of the session `session` tracks when given. `carryableSince`, for the
    /// record of an action acknowledged at once: when it was queued (monotonic nanoseconds), so
    /// that it may wait for the next batch (see ``carryOver(queuedSince:into:)``). `settled`, for
    /// a version queued from the session's ``LatestVersionSlot``: its action's settle was queued
    /// before it.
    mutating func append(
        _ write: QueuedWrite, of session: QueuedSession?, carryableSince: UInt64? = nil, settled: Bool = false
    ) {
        guard let session else {
            hasUntrackedWrites = true
            return writes.append(write)
        }
        if session.join(number) { sessions.append(session) }
        switch write {
        case .ready(.accept(_, let seq, _, let key)):
            if key == nil {
                var awaited = false
                if let settleTiming {
                    session.lastAccept = (seq, settleTiming.now())
                    awaited = session.settlesQuickly
                }
                session.accepts.append((seq, writes.count, carryableSince, awaited))
                if awaited { unsettledAccepts += 1 }
            }
            if key != nil || carryableSince == nil { session.lastAcceptThatCannotWait = writes.count }
        case .ready(.settle(_, let seq)):
            leaveOutVersions(settledBy: seq, of: session)
            if let settleTiming, session.lastAccept.seq == seq {
                session.settlesQuickly = settleTiming.now() &- session.lastAccept.at <= settleTiming.window
            }
            if let accepted = session.accepts.firstIndex(where: { $0.seq == seq }) {
                let (_, index, _, awaited) = session.accepts[accepted]
                writes[index] = nil
                session.accepts.remove(at: accepted)
                if awaited {
                    unsettledAccepts -= 1
                    if index < awaitedBefore { awaitedAccepts -= 1 }
                }
                return
            }
        case .version(let pending):
            if let last = session.lastVersion {
                if last.settled {
                    leaveOut(last.index, of: session)
                } else {
                    session.waiting.append((last.index, last.producedBy))
                }
            }
            session.lastVersion = (writes.count, pending.producedBy, settled || pending.producedBy == 0)
            session.startedThrough = max(session.startedThrough, pending.startedThrough)
        case .ready:
            break
        }
        writes.append(write)
    }

    /// The action `seq` settles: versions it produced that a later one followed are left out,
    /// and its last version may be once one follows.
    private mutating func leaveOutVersions(settledBy seq: UInt64, of session: QueuedSession) {
        for version in session.waiting where version.producedBy == seq { leaveOut(version.index, of: session) }
        session.waiting.removeAll { $0.producedBy == seq }
        if let last = session.lastVersion, last.producedBy == seq { session.lastVersion?.settled = true }
    }

    /// Leaves out the version at `index` unless the session has readers (asked once a batch).
    private mutating func leaveOut(_ index: Int, of session: QueuedSession) {
        guard case .version(let pending) = writes[index] else { return }
        let isWatched = session.isWatched ?? pending.hasReaders
        session.isWatched = isWatched
        if !isWatched { writes[index] = nil }
    }

    /// Starts counting down the records of actions in flight that the batch holds now
    /// (``awaitedAccepts``): each leaves the count when its action settles in the batch; those
    /// queued later are counted once it is called again.
    /// - Returns: how many there are.
    mutating func awaitSettles() -> Int {
        awaitedBefore = writes.count
        awaitedAccepts = unsettledAccepts
        return awaitedAccepts
    }

    /// Moves to `next` (the batch queued after this one is taken) the records of actions in
    /// flight that may wait for it: acknowledged at once, queued at `earliest` or later, and not
    /// yet started when the session's last version in this batch was made, so that nothing this
    /// batch commits depends on them or on anything after them. Only each session's last records
    /// move, after any of its records this batch writes: a crash then loses the last of a
    /// session's acknowledged actions, never one before another it keeps (activation numbers the
    /// unstarted actions it finds again from where the started ones end).
    /// Nothing is moved from a batch with writes queued without their session.
    /// - Returns: when the oldest record moved was queued; nil when none was.
    mutating func carryOver(queuedSince earliest: UInt64, into next: inout QueuedBatch) -> UInt64? {
        guard !hasUntrackedWrites else { return nil }
        var oldest: UInt64?
        for session in sessions where !session.accepts.isEmpty {
            var moving: [(write: QueuedWrite, queuedAt: UInt64, index: Int)] = []
            for accept in session.accepts.reversed() {
                guard accept.index > session.lastAcceptThatCannotWait, let queuedAt = accept.carryableSince,
                    queuedAt >= earliest, accept.seq > session.startedThrough, let write = writes[accept.index]
                else { break }
                moving.append((write, queuedAt, accept.index))
            }
            for (write, queuedAt, index) in moving.reversed() {
                writes[index] = nil
                next.append(write, of: session, carryableSince: queuedAt)
                oldest = min(oldest ?? queuedAt, queuedAt)
            }
        }
        return oldest
    }

    /// Leaves out every write of the sessions of `ids`.
    mutating func leaveOut(_ ids: Set<String>) {
        for index in writes.indices {
            if let write = writes[index], ids.contains(write.instanceID) { writes[index] = nil }
        }
    }

    /// The writes to commit, in order, each version encoded (once).
    func taken() -> [SessionWrite] {
        var taken: [SessionWrite] = []
        taken.reserveCapacity(writes.count)
        for case let write? in writes {
            switch write {
            case .ready(let write): taken.append(write)
            case .version(let pending): taken.append(pending.write())
            }
        }
        return taken
    }
}

/// What one session has in the batch being queued, for ``QueuedBatch`` to leave out what a later
/// write of the session makes needless. Each hosted instance has one and queues its writes with it.
package final class QueuedSession: @unchecked Sendable {
    // @unchecked: these properties are read and written only by `QueuedBatch.append(_:of:)`,
    // which runs only inside `GroupCommitter`'s `queue.withLock` (the one QueuedBatch there is
    // the lock's state), and by `GroupCommitter` inside that same lock (`slottedIn`,
    // `isDropped`), so no two
    // threads ever touch them at once. Indices name writes of batch `batch` only: `join` forgets
    // them when the session is next queued in a later batch. `slot` is set once, at init, and
    // is Sendable itself.
    /// With ``Durability/async``, where the session keeps its latest version (see
    /// ``LatestVersionSlot``); nil with ``Durability/sync``.
    let slot: (any LatestVersionSlot)?
    /// The batch for which the committer last filled `slot` (0: none), so that it lists the
    /// session once per batch among those whose slots to empty when it takes the batch.
    var slottedIn: UInt64 = 0
    fileprivate var batch: UInt64 = 0
    /// Actions accepted in the batch, not yet settled, where their records are, when those
    /// that may wait for the next batch were queued, and whether a commit may wait for them to
    /// settle (see ``QueuedBatch/settleTiming``).
    fileprivate var accepts: [(seq: UInt64, index: Int, carryableSince: UInt64?, awaited: Bool)] = []
    /// The session's last version in the batch; `settled`: its action has settled (or none produced it).
    fileprivate var lastVersion: (index: Int, producedBy: UInt64, settled: Bool)?
    /// Where the last record of the batch that may not wait for the next one is (a record with
    /// an idempotency key, or of an action not acknowledged at once); -1: none.
    fileprivate var lastAcceptThatCannotWait = -1
    /// The last action the instance had started when its versions in the batch were made.
    fileprivate var startedThrough: UInt64 = 0
    /// Versions a later one followed while their action had not settled.
    fileprivate var waiting: [(index: Int, producedBy: UInt64)] = []
    /// Whether the session had readers when first asked in the batch.
    fileprivate var isWatched: Bool?
    /// With ``Durability/sync``, across batches: the session's last action whose record was queued,
    /// and when (monotonic nanoseconds), to tell how soon it settled.
    fileprivate var lastAccept: (seq: UInt64, at: UInt64) = (0, 0)
    /// With ``Durability/sync``, across batches: whether the last of the session's actions that
    /// settled did so within ``QueuedBatch/settleTiming`` of its record being queued (at first:
    /// yes), so that a commit may wait for its next ones.
    fileprivate var settlesQuickly = true
    /// Whether a batch that held the session's writes failed, and the instance that queued them
    /// was dropped: nothing more it queues may be committed (see ``GroupCommitter``'s `drop`).
    var isDropped = false

    package init() {
        slot = nil
    }

    /// A session whose latest version waits in `slot` (``Durability/async``).
    init(slot: any LatestVersionSlot) {
        self.slot = slot
    }

    /// Starts on batch `number` unless it is the one the session knows.
    /// - Returns: whether it started on it.
    fileprivate func join(_ number: UInt64) -> Bool {
        guard batch != number else { return false }
        batch = number
        accepts.removeAll(keepingCapacity: true)
        lastAcceptThatCannotWait = -1
        startedThrough = 0
        lastVersion = nil
        waiting.removeAll(keepingCapacity: true)
        isWatched = nil
        return true
    }
}

/// With ``Durability/sync``: the window within which an action must settle, from its record
/// being queued, for a commit to wait for its session's next ones (``GroupCommitter/settleWindow``),
/// and the clock that times it.
struct SettleTiming: Sendable {
    /// Nanoseconds.
    let window: UInt64
    /// Monotonic nanoseconds now.
    let now: @Sendable () -> UInt64
}
