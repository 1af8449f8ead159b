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
