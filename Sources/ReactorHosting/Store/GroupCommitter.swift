#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Locking
import Logging

/// How soon a write reaches the session store.
public enum Durability: Sendable, Equatable {
    /// An action is acknowledged, and a state shown to anyone, only once committed.
    case sync
    /// Acknowledged and shown at once; committed within `flushInterval`, so a crash may lose
    /// what arrived in that window.
    case async(flushInterval: Duration)
}

/// Commits session writes on a thread of its own, in batches: everything queued while one
/// commit runs goes into the next, as one transaction with one sync to disk (group commit).
///
/// With ``Durability/sync``, each write's completion runs after its batch commits, in the order
/// the writes were queued; that is when an action is acknowledged and a state published. With
/// ``Durability/async`` completions run at once and the thread commits every flush interval.
///
/// When a commit fails (a full disk, a store gone away) the whole batch fails: completions hear
/// `false` (nothing of it was acknowledged), and the instances it touched are dropped from memory
/// (``failedInstances``), so that memory never runs ahead of the store; their next request loads
/// them as last committed. For ``retryPause`` after a failure ``lastError`` is set and new work
/// should be refused; then writes are tried again, and service resumes once one commits.
package final class GroupCommitter: Sendable {
    private struct Queue {
        var writes: [SessionWrite] = []
        /// Each with the session its write is about (nil: it waits for the whole batch), so a
        /// write the store refused as stale is not reported committed.
        var completions: [(id: String?, body: @Sendable (CommitOutcome) -> Void)] = []
        /// Run after the next commit in either durability (see `afterCommit`).
        var afterCommit: [@Sendable () -> Void] = []
        var isSleeping = false
        var isStopping = false
        var lastError: SessionStoreError?
        var failedAt: UInt64 = 0
        /// Sessions whose instances are being dropped after a failed or overtaken commit: their
        /// writes are refused meanwhile (see `drop`).
        var fenced: Set<String> = []
    }

    private let store: any SessionStore
    package let durability: Durability
    /// How long new work is refused after a failed commit, before writes are tried again.
    package let retryPause: Duration
    private let queue = Locked(Queue())
    private let wake = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)
    private let logger: Logger
    /// Told of ids whose version writes a newer writer had overtaken.
    private let staleWriters: @Sendable (Set<String>) -> Void
    /// Told of the ids a failed batch touched.
    private let failedInstances: @Sendable (Set<String>) -> Void
    /// Told of each commit, for metrics.
    private let observer: StoreObserver

    /// Starts the committing thread.
    package init(store: any SessionStore, durability: Durability, logger: Logger, retryPause: Duration = .seconds(1),
                 observer: StoreObserver = StoreObserver(),
                 staleWriters: @escaping @Sendable (Set<String>) -> Void = { _ in },
                 failedInstances: @escaping @Sendable (Set<String>) -> Void = { _ in }) {
        self.store = store
        self.observer = observer
        self.durability = durability
        self.logger = logger
        self.retryPause = retryPause
        self.staleWriters = staleWriters
        self.failedInstances = failedInstances
        var error: Int32 = 0
        guard let thread = startThread({ [self] in run() }, error: &error) else {
            fatalError("could not start the session store's commit thread (error \(error))")
        }
        pthread_detach(thread)
    }

    /// The error of the last failed commit, for ``retryPause`` after it: new work should then be
    /// refused. Nil otherwise.
    package var lastError: SessionStoreError? {
        queue.withLock { queue in
            guard let error = queue.lastError else { return nil }
            if DispatchTime.now().uptimeNanoseconds &- queue.failedAt >= retryPause.nanoseconds {
                return nil
            }
            return error
        }
    }

    /// Queues `write`; `completion` hears whether it was committed, once it was
    /// (``Durability/sync``), or ``CommitOutcome/committed`` at once (``Durability/async``).
    package func enqueue(_ write: SessionWrite, completion: (@Sendable (CommitOutcome) -> Void)? = nil) {
        enqueue(write, awaitingCommit: isSync, completion: completion)
    }

    /// Queues `write` and, with ``Durability/sync`` or when `inAnyDurability`, returns the ticket
    /// a reply waits on before it acknowledges the write; nil when it may be acknowledged at once.
    package func enqueueAcknowledged(_ write: SessionWrite, inAnyDurability: Bool = false) -> CommitTicket? {
        guard isSync || inAnyDurability else {
            enqueue(write)
            return nil
        }
        let ticket = CommitTicket()
        enqueue(write, awaitingCommit: true) { ticket.complete($0) }
        return ticket
    }

    private var isSync: Bool {
        if case .sync = durability { return true }
        return false
    }

    /// Queues `write`; `completion` hears of its commit once it happened when `awaitingCommit`,
    /// else ``CommitOutcome/committed`` at once.
    private func enqueue(_ write: SessionWrite, awaitingCommit: Bool, completion: (@Sendable (CommitOutcome) -> Void)?) {
        let (signal, refused) = queue.withLock { queue -> (Bool, Bool) in
            if queue.fenced.contains(write.instanceID) { return (false, true) }
            queue.writes.append(write)
            guard awaitingCommit else { return (false, false) }
            if let completion { queue.completions.append((write.instanceID, completion)) }
            return (wakeIfSleeping(&queue), false)
        }
        if signal { wake.signal() }
        if refused { return completion?(.failed) ?? () }
        if !awaitingCommit { completion?(.committed) }
    }

    /// Runs `body` once everything queued so far is committed or has failed (at once with
    /// ``Durability/async``).
    package func afterQueuedWrites(_ body: @escaping @Sendable () -> Void) {
        guard case .sync = durability else { return body() }
        let signal = queue.withLock { queue -> Bool in
            queue.completions.append((nil, { _ in body() }))
            return wakeIfSleeping(&queue)
        }
        if signal { wake.signal() }
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

    private func run() {
        while true {
            if case .async(let interval) = durability, !queue.withLock({ $0.isStopping }) {
                _ = wake.wait(timeout: .now() + interval.timeInterval)
            }
            let (writes, completions, afterCommit, stopping) = queue.withLock { queue in
                let taken = (queue.writes, queue.completions, queue.afterCommit, queue.isStopping)
                queue.writes = []
                queue.completions = []
                queue.afterCommit = []
                if taken.0.isEmpty && taken.1.isEmpty && taken.2.isEmpty && !queue.isStopping { queue.isSleeping = true }
                return taken
            }
            if writes.isEmpty && completions.isEmpty && afterCommit.isEmpty {
                if stopping { break }
                if case .sync = durability { wake.wait() }
                continue
            }
            let outcome = writes.isEmpty ? (committed: true, refused: []) : commit(writes)
            for completion in completions {
                if !outcome.committed {
                    completion.body(.failed)
                } else if let id = completion.id, outcome.refused.contains(id) {
                    completion.body(.overtaken)
                } else {
                    completion.body(.committed)
                }
            }
            for body in afterCommit { body() }
        }
        stopped.signal()
    }

    /// Commits one batch; on failure reports it and has the instances it touched dropped.
    /// - Returns: whether it was committed, and the sessions whose writes the store refused as stale.
    private func commit(_ writes: [SessionWrite]) -> (committed: Bool, refused: Set<String>) {
        let started = DispatchTime.now().uptimeNanoseconds
        do {
            let stale = try store.commit(writes)
            observer.committed(writes.count, DispatchTime.now().uptimeNanoseconds &- started)
            if !stale.isEmpty { drop(stale, outcome: .overtaken, by: staleWriters) }
            let recovered = queue.withLock { queue -> Bool in
                defer { queue.lastError = nil }
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
                }
                return queue.lastError == nil
            }
            if error.kind == .corrupt {
                logger.critical("the session store is damaged: a commit failed and was not acknowledged; stop the server and restore the store from a backup",
                                metadata: ["error": "\(error)", "writes": "\(writes.count)"])
            } else if first {
                logger.error("session store commit failed: the batch was not acknowledged; new work is refused for a while",
                             metadata: ["error": "\(error)", "writes": "\(writes.count)"])
            }
            drop(Set(writes.map(\.instanceID)), outcome: .failed, by: failedInstances)
            return (false, [])
        }
    }

    /// Has the instances of `ids` dropped by `dropping`, with nothing more of theirs committed:
    /// the writes they queued after the batch that failed (a version of an action whose record
    /// was in it) are taken out of the queue and fail, and their writes are refused until they
    /// have left memory. Otherwise a refused action's effect could still reach the store.
    private func drop(_ ids: Set<String>, outcome: CommitOutcome, by dropping: @Sendable (Set<String>) -> Void) {
        let purged = queue.withLock { queue -> [@Sendable (CommitOutcome) -> Void] in
            queue.fenced.formUnion(ids)
            queue.writes.removeAll { ids.contains($0.instanceID) }
            var purged: [@Sendable (CommitOutcome) -> Void] = []
            queue.completions.removeAll { completion in
                guard let id = completion.id, ids.contains(id) else { return false }
                purged.append(completion.body)
                return true
            }
            return purged
        }
        for completion in purged { completion(outcome) }
        dropping(ids)
        queue.withLock { $0.fenced.subtract(ids) }
    }
}

extension Duration {
    /// The duration in seconds, as Dispatch and SQL intervals take it.
    package var timeInterval: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

/// What became of a write to the session store.
package enum CommitOutcome: Sendable, Equatable {
    /// It is in the store.
    case committed
    /// The commit failed (a full disk, a store gone away): nothing of it may be acknowledged.
    case failed
    /// The store refused it: another writer (another node) overtook this process on its
    /// session. Nothing of it may be acknowledged; the session's owner can take it.
    case overtaken
}

/// A promise that a write reached the session store: what a reply that must not go out before
/// the commit waits on.
package final class CommitTicket: Sendable {
    private let state = Locked<(outcome: CommitOutcome?, waiters: [@Sendable (CommitOutcome) -> Void])>((nil, []))

    package init() {}

    /// Runs `body` once the write's outcome is known (at once if it is): only
    /// ``CommitOutcome/committed`` may be acknowledged.
    package func whenCommitted(_ body: @escaping @Sendable (_ outcome: CommitOutcome) -> Void) {
        let outcome = state.withLock { state -> CommitOutcome? in
            if state.outcome == nil { state.waiters.append(body) }
            return state.outcome
        }
        if let outcome { body(outcome) }
    }

    /// Records the outcome and runs the waiters.
    func complete(_ outcome: CommitOutcome) {
        let waiters = state.withLock { state -> [@Sendable (CommitOutcome) -> Void] in
            state.outcome = outcome
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter(outcome) }
    }
}
