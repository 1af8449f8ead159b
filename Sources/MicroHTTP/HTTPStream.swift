import CMicroHTTPD
import Locking

/// Produces the body of a streamed response (see ``HTTPResponse/stream(status:headers:source:heartbeat:)``).
public protocol HTTPStreamSource: AnyObject, Sendable {
    /// Called on a server thread when the connection can take bytes (never concurrently for one stream).
    func nextChunk(for stream: HTTPStream) -> HTTPStreamChunk
    /// Called once when the stream ends for any reason (client gone, finished, server shutdown).
    func streamDidClose(_ stream: HTTPStream, reason: HTTPStreamCloseReason)
}

/// What a source hands the server when asked for bytes.
public enum HTTPStreamChunk: Sendable {
    /// Bytes to send (a chunk larger than the socket can take is sent in pieces, in order).
    case bytes([UInt8])
    /// Nothing to send now: the connection is suspended (costing no CPU) until `stream.wake()`.
    case idle
    /// The body is complete.
    case end
}

/// Why a stream ended.
public enum HTTPStreamCloseReason: Sendable, Equatable {
    /// The source returned `.end` and every byte was sent.
    case finished
    /// The client went away (noticed at the next write or heartbeat) or timed out.
    case clientDisconnected
    /// The server shut down.
    case serverShutdown
    /// The server could not send the stream.
    case error
}

/// One streamed response on one connection.
public final class HTTPStream: Sendable {
    private struct State {
        var source: (any HTTPStreamSource)?
        var pending: [UInt8] = []
        var offset = 0
        var suspended = false
        var wakePending = false
        var heartbeatDue = false
        var ended = false
        var closed = false
        var lastWrite: UInt64
    }

    private enum Step {
        case wrote(Int)
        case end
        case again
        case ask(any HTTPStreamSource)
    }

    /// A process-unique number identifying the stream.
    public let id: UInt64
    private let state: Locked<State>
    private let connection: ConnectionHandle
    private let heartbeat: HTTPHeartbeat?
    private let server: ServerCore

    init(id: UInt64, source: any HTTPStreamSource, heartbeat: HTTPHeartbeat?, connection: ConnectionHandle, server: ServerCore) {
        self.id = id
        self.state = Locked(State(source: source, lastWrite: MonotonicClock.nanoseconds()))
        self.connection = connection
        self.heartbeat = heartbeat
        self.server = server
    }

    /// True during graceful shutdown: the source should return its final bytes, then `.end`.
    public var isShuttingDown: Bool { server.isShuttingDown }

    /// Asks the server to pull from the source again. Any thread; resumes the connection once if it
    /// is suspended and is a cheap flag store otherwise. Resumes issued before the server thread
    /// runs are handled together in one pass.
    public func wake() {
        state.withLock { state in
            guard !state.closed else { return }
            if state.suspended {
                state.suspended = false
                connection.resume()
            } else {
                state.wakePending = true
            }
        }
    }

    /// Ends the stream at its next write opportunity, whatever the source says.
    func terminate() {
        state.withLock { $0.ended = true }
        wake()
    }

    /// Heartbeat check from the server's timer: marks the stream and wakes it when idle too long.
    /// Returns the time the stream next needs a look, or nil when it has no heartbeat or is closed.
    func heartbeatTick(now: UInt64) -> UInt64? {
        guard let heartbeat else { return nil }
        let interval = heartbeat.nanoseconds
        return state.withLock { state -> UInt64? in
            guard !state.closed else { return nil }
            if state.heartbeatDue { return now + interval }
            if now &- state.lastWrite >= interval {
                state.heartbeatDue = true
                if state.suspended {
                    state.suspended = false
                    connection.resume()
                }
                return now + interval
            }
            return state.lastWrite + interval
        }
    }

    /// The content reader: fills `buffer` with at most `max` bytes. Returns the count written,
    /// 0 only after suspending the connection, or -1 at the end of the stream.
    func read(into buffer: UnsafeMutableRawPointer, max: Int) -> Int {
        while true {
            let step = state.withLock { state -> Step in
                if state.offset < state.pending.count {
                    let count = min(max, state.pending.count - state.offset)
                    state.pending.withUnsafeBytes { bytes in
                        buffer.copyMemory(from: bytes.baseAddress! + state.offset, byteCount: count)
                    }
                    state.offset += count
                    if state.offset == state.pending.count {
                        state.pending = []
                        state.offset = 0
                    }
                    state.lastWrite = MonotonicClock.nanoseconds()
                    return .wrote(count)
                }
                if state.ended { return .end }
                if state.heartbeatDue {
                    state.heartbeatDue = false
                    if let bytes = self.heartbeat?.bytes, !bytes.isEmpty {
                        state.pending = bytes
                        return .again
                    }
                }
                guard let source = state.source else { return .end }
                return .ask(source)
            }
            switch step {
            case .wrote(let count):
                return count
            case .end:
                return -1
            case .again:
                continue
            case .ask(let source):
                // Read before the source is asked: a source that answers `.idle` may have looked
                // at `isShuttingDown` just before shutdown began, so the answer counts as final
                // only when shutdown had begun before it was asked.
                let shuttingDownBeforeAsking = server.isShuttingDown
                switch source.nextChunk(for: self) {
                case .bytes(let bytes) where !bytes.isEmpty:
                    state.withLock { state in
                        state.pending = bytes
                        state.offset = 0
                    }
                case .end:
                    state.withLock { $0.ended = true }
                    return -1
                case .idle, .bytes:
                    if server.isShuttingDown {
                        // Shutdown began while the source was answering: ask once more, so it
                        // can send its final bytes.
                        if !shuttingDownBeforeAsking { continue }
                        state.withLock { $0.ended = true }
                        return -1
                    }
                    if suspendUnlessWoken() { return 0 }
                }
            }
        }
    }

    /// Suspends the connection unless a wake or heartbeat arrived since the source was asked.
    /// Suspension happens under the same lock as `wake()`, so a resume never precedes its suspend.
    private func suspendUnlessWoken() -> Bool {
        state.withLock { state in
            if state.wakePending || state.heartbeatDue || state.ended {
                state.wakePending = false
                return false
            }
            state.suspended = true
            connection.suspend()
            return true
        }
    }

    /// Called once from the completion callback: tells the source and lets it go.
    func close(reason: HTTPStreamCloseReason) {
        let source = state.withLock { state -> (any HTTPStreamSource)? in
            guard !state.closed else { return nil }
            state.closed = true
            state.suspended = false
            state.pending = []
            defer { state.source = nil }
            return state.source
        }
        source?.streamDidClose(self, reason: reason)
    }
}
