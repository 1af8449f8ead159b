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

/// Runs a sweep every period on a thread of its own until stopped: expiry and passivation call
/// the session store, which may block for as long as the store takes to answer, so they stay off
/// Swift's cooperative threads (a handful, shared by everything async in the process).
final class IdleSweeper: Sendable {
    private let stopRequested = DispatchSemaphore(value: 0)
    private let thread = Locked<pthread_t?>(nil)

    /// Starts the thread: `sweep` runs after each `period`, with how many sweeps ran before it.
    init(period: Duration, sweep: @escaping @Sendable (_ count: Int) -> Void) {
        let stopRequested = self.stopRequested
        let seconds = period.timeInterval
        var error: Int32 = 0
        let started = startThread(
            named: "rs-idle-sweep",
            {
                var count = 0
                while stopRequested.wait(timeout: .now() + seconds) == .timedOut {
                    sweep(count)
                    count += 1
                }
            }, error: &error)
        guard let started else {
            fatalError("could not start the idle-instance sweeper thread (error \(error))")
        }
        thread.withLock { $0 = started }
    }

    /// Stops the thread, after the sweep under way if any, and waits for it. Once only.
    func stop() {
        guard
            let running = thread.withLock({ thread in
                defer { thread = nil }
                return thread
            })
        else { return }
        stopRequested.signal()
        pthread_join(running, nil)
    }
}
