import Locking

/// A push-style stream source: callers `write` already-encoded messages (so one encoding can serve
/// many subscribers) into a bounded queue; the server sends them in order as the connection allows.
///
/// When the queue is full, ``OverflowPolicy/conflate`` keeps only the newest unsent message and
/// ``OverflowPolicy/disconnect`` ends the stream. Memory per subscriber is therefore bounded by
/// `capacity` messages.
public final class HTTPBufferedStreamSource: HTTPStreamSource {
    /// What to do when a write finds the queue full.
    public enum OverflowPolicy: Sendable, Equatable {
        /// Drop every unsent message and keep only the newest.
        case conflate
        /// End the stream (the client sees the body end and may reconnect).
        case disconnect
    }

    private struct State {
        var queue: [[UInt8]] = []
        weak var stream: HTTPStream?
        var finishing = false
        var finalSent = false
        var overflowed = false
        var closed = false
    }

    private let state: Locked<State>
    private let capacity: Int
    private let policy: OverflowPolicy
    private let finalBytes: [UInt8]
    private let onClose: (@Sendable (HTTPStreamCloseReason) -> Void)?

    /// - Parameters:
    ///   - capacity: most unsent messages kept (at least 1).
    ///   - overflow: policy when a write finds `capacity` messages unsent.
    ///   - initial: messages sent first (e.g. a snapshot), counted against `capacity`.
    ///   - finalBytes: sent last when the stream ends by `finish()` or server shutdown.
    ///   - onClose: called once when the stream closes, with the reason (e.g. to unsubscribe).
    public init(
        capacity: Int = 64, overflow: OverflowPolicy = .conflate, initial: [[UInt8]] = [],
        finalBytes: [UInt8] = [], onClose: (@Sendable (HTTPStreamCloseReason) -> Void)? = nil
    ) {
        self.capacity = max(1, capacity)
        self.policy = overflow
        self.finalBytes = finalBytes
        self.onClose = onClose
        self.state = Locked(State(queue: initial))
    }

    /// Queues one message. Returns false when it was not queued because the stream has closed,
    /// is finishing, or overflowed under the `.disconnect` policy. Any thread.
    @discardableResult
    public func write(_ bytes: [UInt8]) -> Bool {
        let (accepted, stream) = state.withLock { state -> (Bool, HTTPStream?) in
            guard !state.closed, !state.finishing, !state.overflowed else { return (false, nil) }
            if state.queue.count >= capacity {
                switch policy {
                case .conflate:
                    state.queue.removeAll(keepingCapacity: true)
                case .disconnect:
                    state.overflowed = true
                    state.queue = []
                    return (false, state.stream)
                }
            }
            state.queue.append(bytes)
            return (true, state.stream)
        }
        stream?.wake()
        return accepted
    }

    /// Ends the stream after the queued messages and `finalBytes`.
    public func finish() {
        let stream = state.withLock { state -> HTTPStream? in
            state.finishing = true
            return state.stream
        }
        stream?.wake()
    }

    /// True once the stream has closed (the client is gone, it finished, or the server stopped).
    public var isClosed: Bool { state.withLock { $0.closed } }

    /// Number of queued, unsent messages.
    public var queuedCount: Int { state.withLock { $0.queue.count } }

    /// Hands the server every queued message as one chunk; during shutdown or after `finish()`,
    /// then `finalBytes`, then `.end`; `.idle` when nothing is queued.
    public func nextChunk(for stream: HTTPStream) -> HTTPStreamChunk {
        let shuttingDown = stream.isShuttingDown
        return state.withLock { state -> HTTPStreamChunk in
            state.stream = stream
            if state.overflowed { return .end }
            if !state.queue.isEmpty {
                let chunk = state.queue.count == 1 ? state.queue[0] : Array(state.queue.joined())
                state.queue.removeAll(keepingCapacity: true)
                return .bytes(chunk)
            }
            guard state.finishing || shuttingDown else { return .idle }
            if !state.finalSent, !finalBytes.isEmpty {
                state.finalSent = true
                return .bytes(finalBytes)
            }
            return .end
        }
    }

    /// Drops the queue, refuses later writes and reports `reason` to `onClose`.
    public func streamDidClose(_ stream: HTTPStream, reason: HTTPStreamCloseReason) {
        state.withLock { state in
            state.closed = true
            state.queue = []
        }
        onClose?(reason)
    }
}
