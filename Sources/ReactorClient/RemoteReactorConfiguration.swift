/// How a ``RemoteReactor`` behaves.
public struct RemoteReactorConfiguration: Sendable {
    /// Gives the bearer token a ``RemoteReactor`` sends with its requests, for a server that
    /// authenticates its callers: called with `false` before each request (return the token the
    /// app holds, nil for none), and with `true` once after the server refused the token with
    /// `401` (fetch a new one: the request is then sent again, once).
    public typealias TokenProvider = @Sendable (_ refresh: Bool) async throws -> String?

    /// How it waits before reconnecting and retrying.
    public var reconnect: ReconnectPolicy
    /// Most actions waiting for the server at once (queued while it cannot be reached); a
    /// ``RemoteReactor/send(_:)`` beyond that fails with ``RemoteReactorError/queueFull(limit:)``.
    public var queueCapacity: Int
    /// Most events kept for an iteration of ``RemoteReactor/states`` or ``RemoteReactor/events``
    /// that reads slower than they arrive; beyond that the oldest are dropped (versions are
    /// skipped, never reordered).
    public var bufferedEvents: Int
    /// The bearer token for a server that authenticates its callers; nil (the default): no
    /// request carries one.
    ///
    /// Every request (creating, attaching, each action, the event stream and each of its
    /// reconnections, deleting) asks it for the token first and sends
    /// `Authorization: Bearer <token>` when it gives one. When the server answers `401`, the
    /// request asks it once more with `refresh: true` and is sent again with the new token; a
    /// second `401` is thrown as a ``ReactorProblem`` of kind `unauthenticated`, and on the
    /// event stream it ends the reactor with ``EndReason/unauthenticated``. What the provider
    /// throws is thrown by the request (the event stream counts it as a failure to connect,
    /// and tries again later).
    ///
    /// ```swift
    /// var configuration = RemoteReactorConfiguration()
    /// configuration.tokenProvider = { refresh in
    ///     refresh ? try await session.refreshedAccessToken() : session.accessToken
    /// }
    /// ```
    ///
    /// It may be called from several tasks at once: keep the token it returns with `false` in
    /// memory, and let concurrent refreshes share one.
    public var tokenProvider: TokenProvider?

    /// A configuration; the defaults suit an app.
    public init(reconnect: ReconnectPolicy = ReconnectPolicy(), queueCapacity: Int = 64, bufferedEvents: Int = 256) {
        self.reconnect = reconnect
        self.queueCapacity = queueCapacity
        self.bufferedEvents = bufferedEvents
    }
}
