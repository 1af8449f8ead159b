import Locking

/// A result that arrives once, awaited by any number of tasks; a waiting task that is cancelled
/// stops waiting with `CancellationError` (the result still arrives for the others).
final class Completion<Value: Sendable>: Sendable {
    private struct State {
        var result: Result<Value, any Error>?
        var waiters: [Int: CheckedContinuation<Value, any Error>] = [:]
        var nextWaiter = 0
    }

    private let state = Locked(State())

    init() {}

    /// Sets the result, once; later calls are ignored. Resumes every waiting task.
    func resolve(_ result: Result<Value, any Error>) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value, any Error>] in
            guard state.result == nil else { return [] }
            state.result = result
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(with: result) }
    }

    /// Whether the result has arrived.
    var isResolved: Bool { state.withLock { $0.result != nil } }

    /// The result, once it arrives.
    var value: Value {
        get async throws {
            let id = state.withLock { state in
                state.nextWaiter += 1
                return state.nextWaiter
            }
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    let ready: Result<Value, any Error>? = state.withLock { state in
                        if let result = state.result { return result }
                        if Task.isCancelled { return .failure(CancellationError()) }
                        state.waiters[id] = continuation
                        return nil
                    }
                    if let ready { continuation.resume(with: ready) }
                }
            } onCancel: {
                state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(throwing: CancellationError())
            }
        }
    }
}
