import Dispatch

/// Waits on a semaphore off the cooperative pool, so a blocked wait does not hold a task thread.
/// - Returns: false when `seconds` passed first (the code under test is stuck).
public func wait(for semaphore: DispatchSemaphore, seconds: Int = 10) async -> Bool {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async {
            continuation.resume(returning: semaphore.wait(timeout: .now() + .seconds(seconds)) == .success)
        }
    }
}

/// Runs `body` on another thread; false when it has not returned within 10 s (a `body` that
/// blocks for ever then holds up only that thread).
public func finishes(_ body: @escaping @Sendable () -> Void) async -> Bool {
    let finished = DispatchSemaphore(value: 0)
    DispatchQueue.global().async {
        body()
        finished.signal()
    }
    return await wait(for: finished)
}
