import Locking

/// Runs a sweep every period on a thread of its own until stopped: expiry and passivation call
/// the session store, which may block for as long as the store takes to answer, so they stay off
/// Swift's cooperative threads (a handful, shared by everything async in the process).
final class IdleSweeper: Sendable {
    private let thread: RepeatingThread

    /// Starts the thread: `sweep` runs after each `period`, with how many sweeps ran before it.
    init(period: Duration, sweep: @escaping @Sendable (_ count: Int) -> Void) {
        var error: Int32 = 0
        guard
            let thread = RepeatingThread(
                named: "rs-idle-sweep", firstWait: period, error: &error,
                { count in
                    sweep(count)
                    return period
                })
        else {
            fatalError("could not start the idle-instance sweeper thread (error \(error))")
        }
        self.thread = thread
    }

    /// Stops the thread, after the sweep under way if any, and waits for it. Once only.
    func stop() { thread.stop() }
}
