import Locking
import Observation
import ReactorClient

/// Runs `operation`, failing with ``TestFailure`` when it has not finished within `timeout` (a
/// guard against a hang, never the expected path: the operation waits on real events).
func within<T: Sendable>(
    _ timeout: Duration = .seconds(20), _ what: String,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw TestFailure("timed out after \(timeout) waiting for \(what)")
        }
        return value
    }
}

extension AsyncSequence where Self: Sendable, Element: Sendable {
    /// The elements up to and including the first that satisfies `last`, or all of them if the
    /// sequence finishes first; bounded by `timeout`.
    func collect(
        until last: @escaping @Sendable (Element) -> Bool = { _ in false },
        timeout: Duration = .seconds(20)
    ) async throws -> [Element] {
        try await within(timeout, "a sequence's elements") {
            var elements: [Element] = []
            for try await element in self {
                elements.append(element)
                if last(element) { break }
            }
            return elements
        }
    }
}

/// Returns once `condition` holds, reading it again whenever an `Observable` property it reads
/// changes (Observation's `withObservationTracking`); bounded by `timeout`.
func observe(
    _ what: String, timeout: Duration = .seconds(20),
    until condition: @escaping @Sendable () -> Bool
) async throws {
    try await within(timeout, what) {
        while !condition() {
            try Task.checkCancellation()
            let resumed = Locked(false)
            let resumeOnce: @Sendable (CheckedContinuation<Void, Never>) -> Void = { continuation in
                if resumed.withLock({ done in
                    defer { done = true }
                    return !done
                }) {
                    continuation.resume()
                }
            }
            let pending = Locked<CheckedContinuation<Void, Never>?>(nil)
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    pending.withLock { $0 = continuation }
                    // Tracks what the condition reads; a change after this line resumes us.
                    let holds = withObservationTracking(condition) { resumeOnce(continuation) }
                    if holds || Task.isCancelled { resumeOnce(continuation) }
                }
            } onCancel: {
                if let continuation = pending.withLock({ $0 }) { resumeOnce(continuation) }
            }
        }
    }
}
