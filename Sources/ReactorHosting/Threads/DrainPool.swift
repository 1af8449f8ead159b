import Locking
import ReactorCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Threads that apply reactors' actions, away from the threads that send them.
///
/// A reactor told to apply its actions on a pool never runs `mutate` or
/// `reduce` on a sender's thread: `send` queues the action and returns, and one of the pool's
/// threads applies the queue, one batch per turn, so a busy reactor takes turns with the others.
///
/// The pool keeps `size` threads taking work. A watchdog looks at them every `stallTimeout`:
/// a thread still inside the same turn as at its last look has *stalled* (user code that loops
/// or blocks). The pool tells that reactor (it then refuses actions until the turn returns) and
/// starts a replacement thread, up to `maximumThreads`, so one reactor's endless `reduce` does
/// not hold up any other reactor. A stalled thread that comes back retires if the pool has
/// enough threads without it.
public final class DrainPool: ActionExecutor {
    /// How many threads take work while none is stalled.
    public let size: Int
    /// The cap on threads, stalled ones included.
    public let maximumThreads: Int
    let core: DrainPoolCore

    /// Creates and starts a pool.
    /// - Parameters:
    ///   - size: threads taking work (at least one).
    ///   - maximumThreads: the cap on threads, stalled ones included (at least `size`).
    ///   - stallTimeout: how long a turn may run before it counts as stalled; it is noticed
    ///     between one and two timeouts after it started. `nil` leaves stall checks to
    ///     ``checkForStalls()``.
    public init(size: Int, maximumThreads: Int = 64, stallTimeout: Duration? = .seconds(1)) {
        self.size = max(1, size)
        self.maximumThreads = max(self.size, maximumThreads)
        core = DrainPoolCore(size: self.size, maximumThreads: self.maximumThreads)
        core.start(watchdogInterval: stallTimeout)
    }

    /// Threads running, stalled ones included.
    public var threadCount: Int { core.withLock { $0.workers.count } }

    /// Threads inside a stalled turn.
    public var stalledThreadCount: Int { core.withLock { $0.workers.count { $0.isStalled } } }

    /// Looks for stalled threads now (the watchdog does this every stall timeout): a thread
    /// inside the same turn as at the previous call is stalled.
    public func checkForStalls() { core.checkForStalls() }

    /// Waits until no turn is queued or running (stalled turns aside), or `timeout` passed.
    /// - Returns: whether the pool went idle in time.
    @discardableResult
    public func waitUntilIdle(timeout: Duration) -> Bool { core.waitUntilIdle(timeout: timeout) }

    /// Lets the threads end once the queued turns are done. Stalled threads end when their
    /// turn returns, if it ever does.
    public func shutdown() { core.shutdown() }

    /// Queues `turn` for the pool's threads.
    @usableFromInline package func schedule(_ turn: any ExecutorTurn) { core.enqueue(turn) }
}

/// The pool's queue, threads and watchdog.
final class DrainPoolCore: @unchecked Sendable {
    // `@unchecked Sendable`: `state` is read and written only between `pthread_mutex_lock(mutex)`
    // and `pthread_mutex_unlock(mutex)` (see `withLock` and the worker loop, which waits on
    // `workAvailable` with the mutex, as `pthread_cond_wait` requires); `queued` is atomic;
    // the mutex and conditions are allocated once and never move.
    // `@exclusivity(unchecked)` on `state` and `Worker`'s fields: the mutex already keeps any two
    // accesses apart, so the dynamic exclusivity checks would only cost time on every turn.
    let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    let workAvailable = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    let watchdogWake = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Broadcast when a thread finds nothing left to do.
    let becameIdle = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    @exclusivity(unchecked) var state = PoolState()
    /// Turns waiting in the queue, readable without the lock by threads about to sleep.
    let queued = Atomic<Int>(0)
    let size: Int
    let maximumThreads: Int
    /// How many times a thread with nothing to do yields the processor, looking for a new turn,
    /// before it sleeps: waking a sleeping thread costs the sender a system call, and under load
    /// the next turn usually comes within microseconds.
    /// (16 measured best against 0, 64 and 256, and against busy spinning, with POSTs to one
    /// instance side by side: see `Benchmarks/DECISIONS.md`.)
    let lingerYields = 16

    struct PoolState {
        var queue: [(any ExecutorTurn)?] = []
        var head = 0
        var idle = 0
        var workers: [Worker] = []
        var isShuttingDown = false
    }

    /// One thread's record, read by the watchdog.
    final class Worker {
        @exclusivity(unchecked) var turn: (any ExecutorTurn)?
        /// Counts turns started, so the watchdog can tell a new turn from the same one.
        @exclusivity(unchecked) var turnsStarted: UInt64 = 0
        @exclusivity(unchecked) var turnsSeen: UInt64 = 0
        @exclusivity(unchecked) var isStalled = false
    }

    init(size: Int, maximumThreads: Int) {
        self.size = size
        self.maximumThreads = maximumThreads
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(workAvailable, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(watchdogWake, &attributes)
        pthread_cond_init(becameIdle, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    /// Runs once every thread has ended (each holds the core until it returns), so no thread
    /// can still be using the mutex or the conditions.
    deinit {
        pthread_cond_destroy(becameIdle)
        pthread_cond_destroy(watchdogWake)
        pthread_cond_destroy(workAvailable)
        pthread_mutex_destroy(mutex)
        becameIdle.deallocate()
        watchdogWake.deallocate()
        workAvailable.deallocate()
        mutex.deallocate()
    }

    func withLock<Result>(_ body: (inout PoolState) -> Result) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body(&state)
    }

    func start(watchdogInterval: Duration?) {
        pthread_mutex_lock(mutex)
        for _ in 0..<size { startWorker() }
        pthread_mutex_unlock(mutex)
        if let watchdogInterval {
            let interval = max(watchdogInterval, .milliseconds(1))
            startThread(named: "rs-watchdog") { [self] in watch(every: interval) }
        }
    }

    /// With the lock held.
    func startWorker() {
        let worker = Worker()
        state.workers.append(worker)
        // The record is only touched with the lock held (see the class comment).
        nonisolated(unsafe) let record = worker
        startThread(named: "rs-reactor") { [self] in work(record) }
    }

    func enqueue(_ turn: any ExecutorTurn) {
        pthread_mutex_lock(mutex)
        state.queue.append(turn)
        queued.add(1, ordering: .relaxed)
        let wake = state.idle > 0
        pthread_mutex_unlock(mutex)
        if wake { pthread_cond_signal(workAvailable) }
    }

    func shutdown() {
        withLock { $0.isShuttingDown = true }
        pthread_cond_broadcast(workAvailable)
        pthread_cond_signal(watchdogWake)
    }

    /// With the lock held: the next queued turn, if any.
    func dequeue() -> (any ExecutorTurn)? {
        guard state.head < state.queue.count else { return nil }
        let turn = state.queue[state.head]
        state.queue[state.head] = nil
        state.head += 1
        if state.head == state.queue.count {
            state.queue.removeAll(keepingCapacity: true)
            state.head = 0
        }
        queued.subtract(1, ordering: .relaxed)
        return turn
    }

    func work(_ worker: Worker) {
        pthread_mutex_lock(mutex)
        while true {
            if let turn = dequeue() {
                worker.turn = turn
                worker.turnsStarted &+= 1
                pthread_mutex_unlock(mutex)
                turn.run()
                pthread_mutex_lock(mutex)
                worker.turn = nil
                if worker.isStalled {
                    worker.isStalled = false
                    turn.setStalled(false)
                    // A replacement took this thread's place while it was away: retire if
                    // enough threads take work without this one (other stalled ones don't).
                    if state.workers.count(where: { !$0.isStalled }) > size {
                        state.workers.removeAll { $0 === worker }
                        break
                    }
                }
                continue
            }
            if state.isShuttingDown {
                state.workers.removeAll { $0 === worker }
                break
            }
            pthread_mutex_unlock(mutex)
            var yields = 0
            while yields < lingerYields && queued.load(ordering: .relaxed) == 0 {
                sched_yield()
                yields += 1
            }
            pthread_mutex_lock(mutex)
            if state.head < state.queue.count || state.isShuttingDown { continue }
            pthread_cond_broadcast(becameIdle)
            state.idle += 1
            pthread_cond_wait(workAvailable, mutex)
            state.idle -= 1
        }
        pthread_mutex_unlock(mutex)
    }

    func waitUntilIdle(timeout: Duration) -> Bool {
        let deadline = Self.deadline(after: timeout)
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while true {
            let busy =
                state.head < state.queue.count
                || state.workers.contains { $0.turn != nil && !$0.isStalled }
            if !busy { return true }
            var until = deadline
            if pthread_cond_timedwait(becameIdle, mutex, &until) == ETIMEDOUT { return false }
        }
    }

    /// The `CLOCK_MONOTONIC` time `interval` from now.
    static func deadline(after interval: Duration) -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let (seconds, attoseconds) = max(interval, .zero).components
        let nanoseconds = Int(now.tv_nsec) + Int(attoseconds / 1_000_000_000)
        return timespec(
            tv_sec: now.tv_sec + Int(seconds) + nanoseconds / 1_000_000_000,
            tv_nsec: nanoseconds % 1_000_000_000)
    }

    func checkForStalls() {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        for worker in state.workers {
            defer { worker.turnsSeen = worker.turnsStarted }
            guard !worker.isStalled, let turn = worker.turn, worker.turnsStarted == worker.turnsSeen else { continue }
            worker.isStalled = true
            turn.setStalled(true)
            if state.workers.count(where: { !$0.isStalled }) < size && state.workers.count < maximumThreads {
                startWorker()
            }
        }
    }

    func watch(every interval: Duration) {
        while true {
            var deadline = Self.deadline(after: interval)
            pthread_mutex_lock(mutex)
            if !state.isShuttingDown { pthread_cond_timedwait(watchdogWake, mutex, &deadline) }
            let stop = state.isShuttingDown
            pthread_mutex_unlock(mutex)
            if stop { return }
            checkForStalls()
        }
    }
}

/// Starts a detached thread running `body`.
private func startThread(named name: String, _ body: @escaping () -> Void) {
    var error: Int32 = 0
    guard startDetachedThread(named: name, body, error: &error) else {
        preconditionFailure("could not start a thread: error \(error)")
    }
}
