import Locking

/// Completes a deferred response (see ``HTTPResponse/deferred(_:)``) from any thread.
public final class HTTPResponder: Sendable {
    private struct State {
        var response: HTTPResponse?
        var responded = false
        /// Whether the connection was suspended to wait for the reply (see ``suspendUnlessAnswered()``).
        var suspended = false
    }

    private let state = Locked(State())
    /// The suspended connection to resume; nil for a responder serving an in-process caller.
    private let connection: ConnectionHandle?
    private let onRespond: @Sendable (HTTPResponder) -> Void

    init(connection: ConnectionHandle, onRespond: @escaping @Sendable (HTTPResponder) -> Void) {
        self.connection = connection
        self.onRespond = onRespond
    }

    /// A responder that hands the response to `deliver` instead of a connection (see
    /// ``HTTPResponse/resolved()``).
    init(deliver: @escaping @Sendable (HTTPResponse) -> Void) {
        self.connection = nil
        self.onRespond = { responder in
            if let response = responder.takeResponse() { deliver(response) }
        }
    }

    /// Sends `response`. Only the first call counts; later calls are ignored.
    ///
    /// The connection is either held (not suspended: the loop looks for the reply each time it
    /// runs, so waking it is enough) or suspended under this lock by ``suspendUnlessAnswered()``,
    /// which checks first that no reply has come: a resume here always follows its suspension.
    public func respond(_ response: HTTPResponse) {
        let first = state.withLock { state -> Bool in
            guard !state.responded else { return false }
            state.responded = true
            state.response = response
            if state.suspended { connection?.resume() } else { connection?.waker.wake() }
            return true
        }
        if first { onRespond(self) }
    }

    /// Whether `respond(_:)` has been called.
    public var hasResponded: Bool { state.withLock { $0.responded } }

    /// Suspends the connection until the reply comes, unless it has come already (then returns
    /// false: take it). Called on the connection's loop thread, from the access handler, once a
    /// reply has been held for the configuration's `deferredReplyHold`, or at once when that is zero.
    func suspendUnlessAnswered() -> Bool {
        state.withLock { state in
            guard !state.responded else { return false }
            state.suspended = true
            connection?.suspend()
            return true
        }
    }

    /// Takes the stored response, once, on the server thread that resumed the connection.
    func takeResponse() -> HTTPResponse? {
        state.withLock { state in
            defer { state.response = nil }
            return state.response
        }
    }
}
