/// How a ``RemoteReactor`` behaves.
public struct RemoteReactorConfiguration: Sendable {
    /// How it waits before reconnecting and retrying.
    public var reconnect: ReconnectPolicy
    /// Most actions waiting for the server at once (queued while it cannot be reached); a
    /// ``RemoteReactor/send(_:)`` beyond that fails with ``RemoteReactorError/queueFull(limit:)``.
    public var queueCapacity: Int
    /// Most events kept for an iteration of ``RemoteReactor/states`` or ``RemoteReactor/events``
    /// that reads slower than they arrive; beyond that the oldest are dropped (versions are
    /// skipped, never reordered).
    public var bufferedEvents: Int

    /// A configuration; the defaults suit an app.
    public init(reconnect: ReconnectPolicy = ReconnectPolicy(), queueCapacity: Int = 64, bufferedEvents: Int = 256) {
        self.reconnect = reconnect
        self.queueCapacity = queueCapacity
        self.bufferedEvents = bufferedEvents
    }
}
