import Locking

/// Completes a deferred response (see ``HTTPResponse/deferred(_:)``) from any thread.
public final class HTTPResponder: Sendable {
    private struct State {
        var response: HTTPResponse?
        var responded = false
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
    /// The connection was suspended before the responder was handed out, so resuming here is
    /// always paired with exactly one suspension.
    public func respond(_ response: HTTPResponse) {
        let first = state.withLock { state -> Bool in
            guard !state.responded else { return false }
            state.responded = true
            state.response = response
            connection?.resume()
            return true
        }
        if first { onRespond(self) }
    }

    /// Whether `respond(_:)` has been called.
    public var hasResponded: Bool { state.withLock { $0.responded } }

    /// Takes the stored response, once, on the server thread that resumed the connection.
    func takeResponse() -> HTTPResponse? {
        state.withLock { state in
            defer { state.response = nil }
            return state.response
        }
    }
}
