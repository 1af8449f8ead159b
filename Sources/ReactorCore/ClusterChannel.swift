import Locking

/// Carries messages to every process serving the same reactors: how a process-wide store (the
/// global state an app merges in `transform(mutation:)`) spans several nodes.
///
/// What any node publishes, every subscriber on every node hears, this node's included, in one
/// order that all nodes share. A store that changes only on what it hears (never directly on
/// what it publishes) therefore goes through the same changes, in the same order, on every node.
public protocol ClusterChannel: Sendable {
    /// Sends `message` to every subscriber on every node.
    func publish(_ message: [UInt8])
    /// Calls `receive` with each message published from now on, on any node, in the shared order.
    func subscribe(_ receive: @escaping @Sendable ([UInt8]) -> Void)
}

/// A ``ClusterChannel`` within one process (one node): each message reaches the subscribers at
/// once, on the publishing thread, in the order published.
public final class LocalChannel: ClusterChannel {
    private let receivers = Locked<[@Sendable ([UInt8]) -> Void]>([])
    /// Serialises deliveries, so that every subscriber hears messages in one order.
    private let delivery = Locked(())

    /// A channel with no subscriber yet.
    public init() {}

    public func publish(_ message: [UInt8]) {
        let receivers = self.receivers.withLock { $0 }
        delivery.withLock { _ in
            for receive in receivers { receive(message) }
        }
    }

    public func subscribe(_ receive: @escaping @Sendable ([UInt8]) -> Void) {
        receivers.withLock { $0.append(receive) }
    }
}
