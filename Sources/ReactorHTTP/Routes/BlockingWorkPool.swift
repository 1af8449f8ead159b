import Dispatch
import Locking
import ReactorHosting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs work that may block for a while (a request that must read the session store) on
/// threads of its own, so that no event loop waits for it: while one request waits for a slow
/// or hung database, the loop goes on serving every other connection.
///
/// Threads start as work arrives, up to ``maxThreads``, and end after ``idleLinger`` without
/// work, so a server whose instances are all in memory keeps none. Beyond the threads at most
/// ``maxQueued`` jobs wait; a job refused for that, or one that waited longer than
/// ``maxQueueWait`` (the store is not keeping up), runs its `refuse` closure instead of its work.
final class BlockingWorkPool: Sendable {
    private struct Job {
        let run: @Sendable () -> Void
        let refuse: @Sendable () -> Void
        let queuedAt: UInt64
    }

    private struct State {
        var jobs: [Job] = []
        /// Index of the oldest job in `jobs` (taken jobs before it are dropped in bulk).
        var head = 0
        var threads = 0
        /// Threads waiting for work that no `submit` has yet claimed.
        var idle = 0
        /// Jobs running now.
        var running = 0
        var queued: Int { jobs.count - head }
    }

    /// The most threads running jobs at once.
    let maxThreads: Int
    /// The most jobs waiting for a thread.
    let maxQueued: Int
    /// The longest a job waits for a thread before it is refused.
    let maxQueueWait: Duration
    /// How long a thread with no work stays.
    let idleLinger: Duration

    private let state = Locked(State())
    private let workArrived = DispatchSemaphore(value: 0)
    /// Monotonic nanoseconds, for how long a job waited.
    private let now: @Sendable () -> UInt64

    init(
        maxThreads: Int = 8, maxQueued: Int = 1024, maxQueueWait: Duration = .seconds(5),
        idleLinger: Duration = .seconds(5),
        now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }
    ) {
        self.maxThreads = max(1, maxThreads)
        self.maxQueued = max(1, maxQueued)
        self.maxQueueWait = maxQueueWait
        self.idleLinger = idleLinger
        self.now = now
    }

    /// Jobs waiting or running now.
    var pending: Int { state.withLock { $0.queued + $0.running } }

    /// Threads the pool has now, busy or idle.
    var threadCount: Int { state.withLock { $0.threads } }

    /// Runs `run` on a pool thread, or `refuse` (on the calling thread when the queue is full,
    /// else on a pool thread) when the job cannot run in time.
    func submit(_ run: @escaping @Sendable () -> Void, refuse: @escaping @Sendable () -> Void) {
        enum Outcome { case refused, queued, wakeIdle, startThread }
        let outcome = state.withLock { state -> Outcome in
            guard state.queued < maxQueued else { return .refused }
            state.jobs.append(Job(run: run, refuse: refuse, queuedAt: now()))
            if state.idle > 0 {
                state.idle -= 1
                return .wakeIdle
            }
            guard state.threads < maxThreads else { return .queued }
            state.threads += 1
            return .startThread
        }
        switch outcome {
        case .refused:
            refuse()
        case .queued:
            break
        case .wakeIdle:
            workArrived.signal()
        case .startThread:
            var error: Int32 = 0
            if !startDetachedThread(named: "rs-blocking", { [self] in work() }, error: &error) {
                // No thread to be had: the jobs wait for a running one, or are refused now.
                let orphans = state.withLock { state -> ArraySlice<Job> in
                    state.threads -= 1
                    guard state.threads == 0 else { return [] }
                    defer {
                        state.jobs = []
                        state.head = 0
                    }
                    return state.jobs[state.head...]
                }
                for job in orphans { job.refuse() }
            }
        }
    }

    private func work() {
        let waitLimit = maxQueueWait.nanoseconds
        while true {
            let job = state.withLock { state -> Job? in
                guard state.queued > 0 else {
                    state.jobs.removeAll(keepingCapacity: state.jobs.capacity <= 64)
                    state.head = 0
                    state.idle += 1
                    return nil
                }
                let job = state.jobs[state.head]
                state.head += 1
                state.running += 1
                // Drop the taken jobs once they are most of the array.
                if state.head > 32 && state.head * 2 > state.jobs.count {
                    state.jobs.removeFirst(state.head)
                    state.head = 0
                }
                return job
            }
            if let job {
                if now() &- job.queuedAt > waitLimit {
                    job.refuse()
                } else {
                    job.run()
                }
                state.withLock { $0.running -= 1 }
                continue
            }
            if workArrived.wait(timeout: .now() + idleLinger.timeInterval) == .timedOut {
                let leaves = state.withLock { state -> Bool in
                    // Still counted idle: no `submit` claimed this thread, so it may go. Else a
                    // claim's signal is on its way (idle counts waiting threads minus signals
                    // sent), and this thread takes it.
                    guard state.idle > 0 else { return false }
                    state.idle -= 1
                    state.threads -= 1
                    return true
                }
                if leaves { return }
                workArrived.wait()
            }
        }
    }
}
