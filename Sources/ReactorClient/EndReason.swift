/// Why the server ended an instance's event stream (its `event: end`).
public struct EndReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The reason as the server names it in `{"reason": …}`.
    public var rawValue: String

    /// A reason by its name; names this client does not know mean "reconnect".
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The instance was deleted (`DELETE /reactors/{id}`). Final.
    public static let deleted = EndReason(rawValue: "deleted")
    /// The instance was idle past the server's idle timeout and was disposed. Final.
    public static let expired = EndReason(rawValue: "expired")
    /// The server is stopping; with a durable store it comes back with the same sessions.
    public static let shutdown = EndReason(rawValue: "shutdown")
    /// The session store failed to keep what the instance did; it comes back as last committed.
    public static let unavailable = EndReason(rawValue: "unavailable")
    /// Another node serves the instance now; a reconnect reaches it.
    public static let moved = EndReason(rawValue: "moved")
    /// The server no longer knows the instance (a `404` on reconnecting: it was deleted or
    /// expired while the client was away, or lost with a server that keeps sessions in memory).
    /// Final.
    public static let unknownInstance = EndReason(rawValue: "unknown-instance")
    /// The server refused the client's credentials on reconnecting (a `401`), with the token
    /// the ``RemoteReactorConfiguration/tokenProvider`` gave after a refresh too, or without a
    /// provider. Final for this client: the instance lives on, and a new
    /// ``RemoteReactor/attach(id:at:configuration:)`` with valid credentials reaches it.
    public static let unauthenticated = EndReason(rawValue: "unauthenticated")

    /// Whether the instance is gone for good, or out of this client's reach
    /// (``unauthenticated``). The other reasons mean "reconnect": the client does so by itself
    /// and resumes where it was.
    public var isFinal: Bool {
        self == .deleted || self == .expired || self == .unknownInstance || self == .unauthenticated
    }

    /// The reason's name.
    public var description: String { rawValue }
}
