import Dispatch
import Locking
import Logging
import NIOCore
import PostgresNIO
import ReactorCore
import Synchronization

/// A ``ClusterChannel`` through PostgreSQL's `LISTEN`/`NOTIFY`: every node listening on the same
/// channel of the same database hears every message, in the order of the commits that sent them
/// (the same order on every node).
///
/// One connection listens and also sends. When it is lost, the channel connects again after a
/// pause; messages sent meanwhile are logged and dropped. A message is at most about 8,000 bytes
/// (PostgreSQL's limit for a notification). Everything runs on an event loop, with callbacks:
/// nothing waits on Swift's cooperative threads.
public final class PostgresChannel: ClusterChannel {
    /// The channel's name in the database.
    public let name: String
    private let configuration: PostgresConnection.Configuration
    private let logger: Logger
    private let eventLoop: any EventLoop
    private let receivers = Locked<[@Sendable ([UInt8]) -> Void]>([])
    private let connection = Locked<PostgresConnection?>(nil)
    private let isClosed = Atomic<Bool>(false)

    /// Starts listening on `name` (lower-case letters, digits and underscores) and returns once
    /// it is, or once the first try failed (it is logged, and tried again every second).
    public init(location: PostgresLocation, name: String, logger: Logger = Logger(label: "reactor-server.postgres")) {
        precondition(
            !name.isEmpty && name.utf8.allSatisfy { $0 == UInt8(ascii: "_") || (0x30...0x39).contains($0) || (0x61...0x7a).contains($0) },
            "a channel name is lower-case letters, digits and underscores")
        self.name = name
        self.logger = logger
        self.configuration = location.connectionConfiguration
        self.eventLoop = PostgresConnection.defaultEventLoopGroup.any()
        do {
            try connectAndListen().wait()
        } catch {
            logger.warning(
                "cluster channel not listening yet; trying again every second",
                metadata: ["channel": "\(name)", "error": "\(PostgresLink.describe(error))"])
            connectAgainSoon()
        }
    }

    public func publish(_ message: [UInt8]) {
        guard let connection = connection.withLock({ $0 }) else {
            logger.error("cluster channel not connected: a message was dropped", metadata: ["channel": "\(name)"])
            return
        }
        let (logger, name) = (self.logger, self.name)
        connection.query("SELECT pg_notify(\(name), \(String(decoding: message, as: UTF8.self)))", logger: logger)
            .whenFailure { error in
                logger.error(
                    "cluster channel could not send a message; it was dropped",
                    metadata: ["channel": "\(name)", "error": "\(PostgresLink.describe(error))"])
            }
    }

    public func subscribe(_ receive: @escaping @Sendable ([UInt8]) -> Void) {
        receivers.withLock { $0.append(receive) }
    }

    /// Stops listening and closes the connection.
    public func close() {
        isClosed.store(true, ordering: .relaxed)
        PostgresLink.close(
            connection.withLock { current in
                defer { current = nil }
                return current
            })
    }

    /// Connects and listens; the future succeeds once `LISTEN` has been answered.
    private func connectAndListen() -> EventLoopFuture<Void> {
        PostgresConnection.connect(on: eventLoop, configuration: configuration, id: 0, logger: logger)
            .flatMap { [self] live in
                live.addListener(channel: name) { [weak self] _, notification in
                    self?.deliver(Array(notification.payload.utf8))
                }
                // Answered after the LISTEN the listener sent: listening from here on.
                return live.query("SELECT 1", logger: logger).map { _ in live }
                    .flatMapErrorThrowing { error in
                        PostgresLink.close(live)
                        throw error
                    }
            }
            .map { [self] live in
                guard !isClosed.load(ordering: .relaxed) else { return PostgresLink.close(live) }
                connection.withLock { $0 = live }
                live.closeFuture.whenComplete { [weak self] _ in self?.lost(live) }
            }
    }

    private func deliver(_ message: [UInt8]) {
        for receive in receivers.withLock({ $0 }) { receive(message) }
    }

    /// The connection closed: unless the channel was closed, connect again.
    private func lost(_ live: PostgresConnection) {
        connection.withLock { current in
            if current === live { current = nil }
        }
        guard !isClosed.load(ordering: .relaxed) else { return }
        logger.warning("cluster channel lost its connection; connecting again", metadata: ["channel": "\(name)"])
        connectAgainSoon()
    }

    private func connectAgainSoon() {
        eventLoop.scheduleTask(in: .seconds(1)) { [weak self] in
            guard let self, !self.isClosed.load(ordering: .relaxed) else { return }
            self.connectAndListen().whenFailure { [weak self] _ in self?.connectAgainSoon() }
        }
    }
}
