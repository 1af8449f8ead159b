import Foundation
import Locking

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where the client calls URLSession and where URLSession calls the client back: serial queues
/// of the client's own, never a thread of the concurrency pool.
///
/// With FoundationNetworking (Linux) the concurrency pool is Dispatch's global queue, as many
/// threads as cores. There URLSession starts and cancels a task with a `DispatchQueue.sync` on
/// its own queue, and a session's default delegate queue runs on that same global queue: with
/// every pool thread waiting in such a `sync`, every task of the process stalled until one came
/// free (about 10 s, seen on two cores). Apple's URLSession has neither trait.
enum SessionQueues {
    #if canImport(FoundationNetworking)
        /// Where tasks are started and cancelled.
        private static let controlQueue = DispatchQueue(label: "ReactorClient.URLSession.control")
    #endif

    /// A delegate queue for a new session: with FoundationNetworking one operation at a time on
    /// a serial queue of its own; nil (URLSession's default) with Apple's.
    static func delegateQueue() -> OperationQueue? {
        #if canImport(FoundationNetworking)
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            // FoundationNetworking declares `underlyingQueue` `unowned(unsafe)`, as Darwin does,
            // but its setter keeps a strong reference: the operation queue holds this one.
            let callbacks = DispatchQueue(label: "ReactorClient.URLSession.callbacks")
            queue.underlyingQueue = callbacks
            return queue
        #else
            return nil
        #endif
    }

    /// Runs `body`, which may wait on URLSession's own queue: with FoundationNetworking off the
    /// concurrency pool, after what was handed over before it; with Apple's, at once.
    static func control(_ body: @escaping @Sendable () -> Void) {
        #if canImport(FoundationNetworking)
            controlQueue.async(execute: body)
        #else
            body()
        #endif
    }

    /// Sends `request` on `session` and returns the body and response, as
    /// `URLSession.data(for:)` does, cancelled with the calling task (`URLError.cancelled`).
    static func data(for request: URLRequest, on session: URLSession) async throws -> (Data, URLResponse) {
        #if canImport(FoundationNetworking)
            let pending = PendingTask()
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    control {
                        let task = pending.start {
                            session.dataTask(with: request) { data, response, error in
                                if let error {
                                    continuation.resume(throwing: error)
                                } else if let response {
                                    continuation.resume(returning: (data ?? Data(), response))
                                } else {
                                    continuation.resume(throwing: URLError(.badServerResponse))
                                }
                            }
                        }
                        if let task {
                            task.resume()
                        } else {
                            continuation.resume(throwing: URLError(.cancelled))
                        }
                    }
                }
            } onCancel: {
                // Not here: this runs under the task's status lock, and a completion being
                // delivered on URLSession's queue may be waiting for that lock.
                control { pending.cancel() }
            }
        #else
            return try await session.data(for: request)
        #endif
    }
}

#if canImport(FoundationNetworking)
    /// A data task that may be cancelled before it is made: then it is never made.
    private final class PendingTask: Sendable {
        private let state = Locked<(task: URLSessionDataTask?, cancelled: Bool)>((nil, false))

        /// The task `make` returns, or nil (and `make` is not called) when cancelled already.
        func start(_ make: () -> URLSessionDataTask) -> URLSessionDataTask? {
            state.withLock { state in
                guard !state.cancelled else { return nil }
                let task = make()
                state.task = task
                return task
            }
        }

        func cancel() {
            let task = state.withLock { state in
                state.cancelled = true
                return state.task
            }
            task?.cancel()
        }
    }
#endif
