import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What an event stream's request delivers: its response, then its body in pieces.
enum StreamPart: Sendable {
    /// The status and headers (the first part).
    case response(HTTPReply)
    /// The next bytes of the body, as they arrived.
    case bytes(Data)
}

/// One streaming request over a URLSession of its own, whose delegate hands each piece of the
/// body on as it arrives (`URLSession.bytes(for:)` is not in FoundationNetworking on Linux).
/// Ending the iteration cancels the task and invalidates the session.
final class StreamingRequest: NSObject, URLSessionDataDelegate, Sendable {
    private let continuation: AsyncThrowingStream<StreamPart, any Error>.Continuation

    private init(continuation: AsyncThrowingStream<StreamPart, any Error>.Continuation) {
        self.continuation = continuation
    }

    /// Starts `request`; its parts arrive on the returned stream.
    static func start(_ request: URLRequest) -> AsyncThrowingStream<StreamPart, any Error> {
        let (stream, continuation) = AsyncThrowingStream<StreamPart, any Error>.makeStream(bufferingPolicy: .unbounded)
        let delegate = StreamingRequest(continuation: continuation)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        // The session keeps its delegate until it is invalidated, below.
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: SessionQueues.delegateQueue())
        let task = session.dataTask(with: request)
        // Started and ended off the concurrency pool (see `SessionQueues`), in that order.
        continuation.onTermination = { _ in
            SessionQueues.control {
                task.cancel()
                session.invalidateAndCancel()
            }
        }
        SessionQueues.control { task.resume() }
        return stream
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        if let http = response as? HTTPURLResponse {
            continuation.yield(.response(HTTPReply(http)))
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        continuation.yield(.bytes(data))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        if let error {
            continuation.finish(throwing: error)
        } else {
            continuation.finish()
        }
    }
}
