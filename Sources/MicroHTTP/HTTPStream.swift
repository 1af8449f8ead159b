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
    /// The client went away (noticed when it closes the connection, or at the next write or
    /// heartbeat when it vanished without closing it) or timed out.
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
        /// The client hung up (seen by the loop's ``HangUpWatch``): the next read aborts.
        var clientGone = false
        var lastWrite: UInt64
    }

    private enum Step {
        case wrote(Int)
        case end
        case abort
        case again
        case ask(any HTTPStreamSource)
    }

    /// What a read gave libmicrohttpd.
    enum ReadResult: Equatable {
        /// This many bytes were copied into the buffer.
        case wrote(Int)
        /// Nothing now: the connection has been suspended until the stream is woken.
        case suspended
        /// The body is complete.
        case end
        /// The client has gone: the connection is closed without the body's end.
        case abort
    }

    /// A process-unique number identifying the stream.
    public let id: UInt64
    private let state: Locked<State>
    private let connection: ConnectionHandle
    private let heartbeat: HTTPHeartbeat?
    private let server: ServerCore
    /// The connection's socket in its loop's watch; nil when it could not be watched.
    private let watched: WatchedSocket?

    /// Puts `socket` (the connection's, or -1) in `hangUps`, so that the client's hang-up ends the
    /// stream at once (``clientHungUp()``). From the loop thread, before the response is queued.
    init(
        id: UInt64, source: any HTTPStreamSource, heartbeat: HTTPHeartbeat?, connection: ConnectionHandle, server: ServerCore,
        hangUps: HangUpWatch, socket: Int32
    ) {
        self.id = id
        self.state = Locked(State(source: source, lastWrite: MonotonicClock.nanoseconds()))
        self.connection = connection
        self.heartbeat = heartbeat
        self.server = server
        if socket >= 0, hangUps.watch(socket: socket, streamID: id) {
            watched = WatchedSocket(watch: hangUps, socket: socket)
        } else {
            watched = nil
        }
    }

    /// The client hung up: resumes the connection if it is suspended, and the next read aborts it.
    /// From the loop thread that runs the connection's daemon, between its runs.
    func clientHungUp() {
        state.withLock { state in
            guard !state.closed else { return }
            state.clientGone = true
            resumeIfSuspended(&state)
        }
    }

    /// True during graceful shutdown: the source should return its final bytes, then `.end`.
    public var isShuttingDown: Bool { server.isShuttingDown }

    /// Asks the server to pull from the source again. Any thread; resumes the connection once if it
    /// is suspended and is a cheap flag store otherwise. Resumes issued before the server thread
    /// runs are handled together in one pass.
    public func wake() {
        state.withLock { state in
            guard !state.closed else { return }
            if !resumeIfSuspended(&state) {
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
                resumeIfSuspended(&state)
                return now + interval
            }
            return state.lastWrite + interval
        }
    }

    /// The content reader: fills `buffer` with at most `max` bytes.
    func read(into buffer: UnsafeMutableRawPointer, max: Int) -> ReadResult {
        while true {
            let step = state.withLock { state -> Step in
                if state.clientGone { return .abort }
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
                return .wrote(count)
            case .end:
                return .end
            case .abort:
                return .abort
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
                    return .end
                case .idle, .bytes:
                    if server.isShuttingDown {
                        // Shutdown began while the source was answering: ask once more, so it
                        // can send its final bytes.
                        if !shuttingDownBeforeAsking { continue }
                        state.withLock { $0.ended = true }
                        return .end
                    }
                    if suspendUnlessWoken() { return .suspended }
                }
            }
        }
    }

    /// Resumes the connection if it is suspended, under the lock that guards `state`; returns
    /// whether it was.
    @discardableResult
    private func resumeIfSuspended(_ state: inout State) -> Bool {
        guard state.suspended else { return false }
        state.suspended = false
        connection.resume()
        return true
    }

    /// Suspends the connection unless a wake, heartbeat or hang-up arrived since the source was
    /// asked. Suspension happens under the same lock as `wake()`, so a resume never precedes its suspend.
    private func suspendUnlessWoken() -> Bool {
        state.withLock { state in
            if state.wakePending || state.heartbeatDue || state.ended || state.clientGone {
                state.wakePending = false
                return false
            }
            state.suspended = true
            connection.suspend()
            return true
        }
    }

    /// Called once from the completion callback, while the socket is still open: stops watching
    /// it, tells the source and lets it go.
    func close(reason: HTTPStreamCloseReason) {
        let (first, source) = state.withLock { state -> (Bool, (any HTTPStreamSource)?) in
            guard !state.closed else { return (false, nil) }
            state.closed = true
            state.suspended = false
            state.pending = []
            defer { state.source = nil }
            return (true, state.source)
        }
        if first, let watched { watched.watch.unwatch(socket: watched.socket) }
        source?.streamDidClose(self, reason: reason)
    }
}
