import Dispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A thread of its own that runs a body again and again, waiting between runs as long as the
/// last run asked, until ``stop()``.
///
/// For the package's periodic work that must keep its time whatever Swift's cooperative threads
/// are doing (a handful, shared by everything async in the process: a task that blocks one holds
/// up every task queued behind it), or that blocks itself.
package final class RepeatingThread: Sendable {
    private let stopRequested = DispatchSemaphore(value: 0)
    private let thread = Locked<pthread_t?>(nil)

    /// Starts a thread named `name` that waits `firstWait`, then runs `body`, then waits as long as
    /// `body` returned, and so on; `body` gets how many runs came before it. Nil when the system
    /// could not start a thread (`errno`-style code in `error`).
    package init?(
        named name: String, firstWait: Duration, error: inout Int32, _ body: @escaping @Sendable (_ runsBefore: Int) -> Duration
    ) {
        let stopRequested = self.stopRequested
        let started = startThread(
            named: name,
            {
                var wait = firstWait
                var runs = 0
                while stopRequested.wait(timeout: .now() + wait.timeInterval) == .timedOut {
                    wait = body(runs)
                    runs += 1
                }
            }, error: &error)
        guard let started else { return nil }
        thread.withLock { $0 = started }
    }

    /// Stops the thread, after the run under way if any, and waits for it; not from the thread
    /// itself. Later calls do nothing.
    package func stop() {
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
