/// What can go wrong on the client's side of a ``RemoteReactor``.
public enum RemoteReactorError: Error, Sendable, Equatable {
    /// The instance ended for good (see ``EndReason/isFinal``); nothing more can be sent.
    case ended(EndReason)
    /// The queue of actions waiting for the server holds its limit; this action was not queued.
    case queueFull(limit: Int)
    /// The reactor was closed (or released) before the action reached the server.
    case closed
    /// The server accepted the action but its wait timeout passed before the action's mutations
    /// were reduced; the state follows on ``RemoteReactor/states``.
    case waitTimedOut(seq: UInt64)
    /// The server's answer was not what its contract says (an unexpected status or body).
    case unexpectedResponse(status: Int, detail: String)
}
