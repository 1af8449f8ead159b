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
/// When a commit fails (a full disk, a store gone away) nothing is dropped: the batch is tried
/// again, with a growing pause, until it commits, and ``isHealthy`` is false meanwhile so that
/// new actions are refused rather than queued behind it.
package final class GroupCommitter: Sendable {
    private struct Queue {
        var writes: [SessionWrite] = []
        var completions: [@Sendable () -> Void] = []
        var isSleeping = false
        var isStopping = false
        var lastError: SessionStoreError?
    }

    package let store: any SessionStore
    package let durability: Durability
    private let queue = Locked(Queue())
    private let wake = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)
    private let logger: Logger
    /// Told of ids whose version writes a newer writer had overtaken.
    private let staleWriters: @Sendable (Set<String>) -> Void

    /// Starts the committing thread.
    package init(store: any SessionStore, durability: Durability, logger: Logger,
                 staleWriters: @escaping @Sendable (Set<String>) -> Void = { _ in }) {
        self.store = store
        self.durability = durability
        self.logger = logger
        self.staleWriters = staleWriters
        var error: Int32 = 0
        guard let thread = startThread({ [self] in run() }, error: &error) else {
            fatalError("could not start the session store's commit thread (error \(error))")
        }
        pthread_detach(thread)
    }

    /// False while commits fail; new actions should then be refused.
    package var isHealthy: Bool { queue.withLock { $0.lastError == nil } }

    /// The error of the last failed commit, while commits fail.
    package var lastError: SessionStoreError? { queue.withLock { $0.lastError } }

    /// Queues `write`; `completion` runs once it is committed (``Durability/sync``) or at once
    /// (``Durability/async``).
    package func enqueue(_ write: SessionWrite, completion: (@Sendable () -> Void)? = nil) {
        let signal = queue.withLock { queue -> Bool in
            queue.writes.append(write)
            guard case .sync = durability else { return false }
            if let completion { queue.completions.append(completion) }
            return wakeIfSleeping(&queue)
        }
        if signal { wake.signal() }
        if case .async = durability { completion?() }
    }

    /// Runs `body` once everything queued so far is committed (at once with ``Durability/async``).
    package func afterQueuedWrites(_ body: @escaping @Sendable () -> Void) {
        guard case .sync = durability else { return body() }
        let signal = queue.withLock { queue -> Bool in
            queue.completions.append(body)
            return wakeIfSleeping(&queue)
        }
        if signal { wake.signal() }
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
        var retryPause: Duration = .milliseconds(50)
        while true {
            if case .async(let interval) = durability, !queue.withLock({ $0.isStopping }) {
                _ = wake.wait(timeout: .now() + interval.timeInterval)
            }
            let (writes, completions, stopping) = queue.withLock { queue in
                let taken = (queue.writes, queue.completions, queue.isStopping)
                queue.writes = []
                queue.completions = []
                if taken.0.isEmpty && taken.1.isEmpty && !queue.isStopping { queue.isSleeping = true }
                return taken
            }
            if writes.isEmpty && completions.isEmpty {
                if stopping { break }
                if case .sync = durability { wake.wait() }
                continue
            }
            if !writes.isEmpty {
                do {
                    let stale = try store.commit(writes)
                    if !stale.isEmpty { staleWriters(stale) }
                    if queue.withLock({ $0.lastError }) != nil {
                        logger.notice("session store writable again; commits resume")
                        queue.withLock { $0.lastError = nil }
                    }
                    retryPause = .milliseconds(50)
                } catch {
                    let first = queue.withLock { queue in
                        let first = queue.lastError == nil
                        queue.lastError = error
                        // Put the batch back in front of what arrived meanwhile, in order.
                        queue.writes = writes + queue.writes
                        queue.completions = completions + queue.completions
                        queue.isSleeping = false
                        return first
                    }
                    if first {
                        logger.error("session store commit failed; actions are refused until it succeeds",
                                     metadata: ["error": "\(error)"])
                    }
                    if stopping {
                        logger.critical("session store unwritable at shutdown; \(writes.count) writes not committed",
                                        metadata: ["error": "\(error)"])
                        break
                    }
                    _ = DispatchSemaphore(value: 0).wait(timeout: .now() + retryPause.timeInterval)
                    retryPause = min(retryPause * 2, .seconds(1))
                    continue
                }
            }
            for completion in completions { completion() }
        }
        stopped.signal()
    }
}

extension Duration {
    /// The duration in seconds, as Dispatch takes it.
    var timeInterval: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
