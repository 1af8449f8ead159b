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
struct QueuedBatch {
    /// The writes in the order queued; nil where one was left out.
    private(set) var writes: [QueuedWrite?] = []
    /// The batch's number: a ``QueuedSession`` holds what it knows of one batch only.
    let number: UInt64

    init(number: UInt64) {
        self.number = number
    }

    /// How many writes were queued, including those left out since.
    var count: Int { writes.count }

    var isEmpty: Bool { writes.isEmpty }

    /// Queues `write`, of the session `session` tracks when given.
    mutating func append(_ write: QueuedWrite, of session: QueuedSession?) {
        guard let session else { return writes.append(write) }
        session.join(number)
        switch write {
        case .ready(.accept(_, let seq, _, let key)):
            if key == nil { session.accepts.append((seq, writes.count)) }
        case .ready(.settle(_, let seq)):
            leaveOutVersions(settledBy: seq, of: session)
            if let accepted = session.accepts.firstIndex(where: { $0.seq == seq }) {
                writes[session.accepts[accepted].index] = nil
                session.accepts.remove(at: accepted)
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
            session.lastVersion = (writes.count, pending.producedBy, pending.producedBy == 0)
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
    // the lock's state), so no two threads ever touch them at once. Indices name writes of batch
    // `batch` only: `join` forgets them when the session is next queued in a later batch.
    fileprivate var batch: UInt64 = 0
    /// Actions accepted in the batch, not yet settled, and where their records are.
    fileprivate var accepts: [(seq: UInt64, index: Int)] = []
    /// The session's last version in the batch; `settled`: its action has settled (or none produced it).
    fileprivate var lastVersion: (index: Int, producedBy: UInt64, settled: Bool)?
    /// Versions a later one followed while their action had not settled.
    fileprivate var waiting: [(index: Int, producedBy: UInt64)] = []
    /// Whether the session had readers when first asked in the batch.
    fileprivate var isWatched: Bool?

    package init() {}

    /// Starts on batch `number` unless it is the one the session knows.
    fileprivate func join(_ number: UInt64) {
        guard batch != number else { return }
        batch = number
        accepts = []
        lastVersion = nil
        waiting = []
        isWatched = nil
    }
}
