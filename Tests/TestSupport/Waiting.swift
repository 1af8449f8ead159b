import Dispatch
import Foundation

// On Linux the concurrency pool is Dispatch's global queue, as many threads as cores (two
// here). Blocking work sent to `DispatchQueue.global()` holds that pool up just as blocking in a
// task does, so what blocks runs on a thread of its own.

/// Runs `body` on a thread of its own and awaits its result without holding a thread of the
/// concurrency pool.
public func onAThreadOfItsOwn<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

/// Waits on a semaphore off the cooperative pool, so a blocked wait does not hold a task thread.
/// - Returns: false when `seconds` passed first (the code under test is stuck).
public func wait(for semaphore: DispatchSemaphore, seconds: Int = 10) async -> Bool {
    await onAThreadOfItsOwn { semaphore.wait(timeout: .now() + .seconds(seconds)) == .success }
}

/// Runs `body` on another thread; false when it has not returned within 10 s (a `body` that
/// blocks for ever then holds up only that thread).
public func finishes(_ body: @escaping @Sendable () -> Void) async -> Bool {
    let finished = DispatchSemaphore(value: 0)
    Thread {
        body()
        finished.signal()
    }.start()
    return await wait(for: finished)
}

/// Runs `body` on a thread of its own while every thread of the concurrency pool is held by a task
/// that blocks (as a handler's or a reactor's blocking call would hold it), and returns what it
/// returned: work that needs the pool cannot run until `body` has returned.
///
/// The pool is taken to be as wide as the CPUs online, as Dispatch makes it on Linux. Each blocking
/// task waits at most 30 s for `body` to end, and `body` waits at most 10 s for them to start, so
/// a wrong width makes the test weaker, never stuck.
public func whileTheConcurrencyPoolIsBlocked<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    let width = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    let started = DispatchSemaphore(value: 0)
    let released = DispatchSemaphore(value: 0)
    for _ in 0..<width {
        Task.detached {
            started.signal()
            _ = released.wait(timeout: .now() + 30)
        }
    }
    return await onAThreadOfItsOwn {
        for _ in 0..<width { _ = started.wait(timeout: .now() + 10) }
        defer { for _ in 0..<width { released.signal() } }
        return body()
    }
}

/// Waits until `condition`, which another thread makes true, holds; looks again each
/// millisecond. False when `timeout` passed first (a failure guard, not a timing).
public func eventually(timeout: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return true
}
