import Dispatch
import Locking
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Folds a store's journal on a thread of its own: woken by a commit, it lets further commits
/// gather for ``delay``, then folds until the journal is empty, and sleeps until the next commit.
final class JournalFolder: Sendable {
    /// How long commits gather before a fold: long enough that a busy session's many commits
    /// become one write of its row, short enough that the journal stays small.
    static let delay: DispatchTimeInterval = .milliseconds(20)

    private struct State {
        var woken = false
        var stopped = false
        /// Signalled when the thread has ended; nil until it started.
        var finished: DispatchSemaphore?
    }

    private let work = DispatchSemaphore(value: 0)
    private let stopping = DispatchSemaphore(value: 0)
    private let state = Locked(State())

    /// Starts the thread; `fold` folds one slice and says whether rows are left. Without a
    /// thread (the system refused one), reads still fold what they need on demand.
    func start(_ fold: @escaping @Sendable () -> Bool) {
        let finished = DispatchSemaphore(value: 0)
        var error: Int32 = 0
        guard let thread = startThread({ [self] in
            run(fold)
            finished.signal()
        }, error: &error) else { return }
        pthread_detach(thread)
        state.withLock { $0.finished = finished }
    }

    private func run(_ fold: @Sendable () -> Bool) {
        while true {
            work.wait()
            if stopping.wait(timeout: .now() + Self.delay) == .success { return }
            state.withLock { $0.woken = false }
            while fold() {}
        }
    }

    /// A commit appended to the journal: fold soon.
    func wake() {
        let first = state.withLock { state -> Bool in
            guard !state.woken, !state.stopped else { return false }
            state.woken = true
            return true
        }
        if first { work.signal() }
    }

    /// Ends the thread; with `wait`, returns once it has (never call it so from the thread).
    func stop(wait: Bool = true) {
        let finished = state.withLock { state -> DispatchSemaphore?? in
            guard !state.stopped else { return nil }
            state.stopped = true
            return .some(state.finished)
        }
        guard let finished else { return }
        stopping.signal()
        work.signal()
        if wait { finished?.wait() }
    }
}
