import Dispatch
import Locking
import Logging
import PostgresNIO
import ReactorCore

/// A ``ClusterChannel`` through PostgreSQL's `LISTEN`/`NOTIFY`: every node listening on the same
/// channel of the same database hears every message, in the order of the commits that sent them
/// (the same order on every node).
///
/// One connection listens and also sends. When it is lost, the channel connects again after a
/// pause; messages sent meanwhile are logged and dropped. A message is at most about 8,000 bytes
/// (PostgreSQL's limit for a notification).
public final class PostgresChannel: ClusterChannel {
    /// The channel's name in the database.
    public let name: String
    private let location: PostgresLocation
    private let logger: Logger
    private let receivers = Locked<[@Sendable ([UInt8]) -> Void]>([])
    private let connection = Locked<PostgresConnection?>(nil)
    private let listener = Locked<Task<Void, Never>?>(nil)

    /// Starts listening on `name` (letters, digits and underscores) and returns once it is (or
    /// after `readyWithin`, logging that it is not yet).
    public init(location: PostgresLocation, name: String, readyWithin: Duration = .seconds(10),
                logger: Logger = Logger(label: "reactor-server.postgres")) {
        precondition(!name.isEmpty && name.utf8.allSatisfy { $0 == UInt8(ascii: "_") || (0x30...0x39).contains($0) || (0x61...0x7a).contains($0) },
                     "a channel name is lower-case letters, digits and underscores")
        self.name = name
        self.location = location
        self.logger = logger
        let ready = DispatchSemaphore(value: 0)
        let task = Task.detached { [self] in await listen(signalling: ready) }
        listener.withLock { $0 = task }
        if ready.wait(timeout: .now() + .nanoseconds(Int(clamping: readyWithin.nanoseconds))) == .timedOut {
            logger.warning("not yet listening for the cluster channel; messages from other nodes arrive once it is",
                           metadata: ["channel": "\(name)"])
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
                logger.error("cluster channel could not send a message; it was dropped",
                             metadata: ["channel": "\(name)", "error": "\(PostgresLink.describe(error))"])
            }
    }

    public func subscribe(_ receive: @escaping @Sendable ([UInt8]) -> Void) {
        receivers.withLock { $0.append(receive) }
    }

    /// Stops listening and closes the connection.
    public func close() {
        listener.withLock { task in
            task?.cancel()
            task = nil
        }
    }

    /// Connects and listens, again after a pause whenever the connection is lost, until cancelled.
    private func listen(signalling ready: DispatchSemaphore) async {
        var signalled = false
        let configuration = PostgresConnection.Configuration(
            host: location.host, port: location.port, username: location.user,
            password: location.password, database: location.database, tls: .disable)
        while !Task.isCancelled {
            var live: PostgresConnection?
            do {
                let connected = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
                live = connected
                try await connected.listen(on: name) { notifications in
                    connection.withLock { $0 = connected }
                    if !signalled {
                        ready.signal()
                        signalled = true
                    } else {
                        logger.notice("cluster channel listening again", metadata: ["channel": "\(name)"])
                    }
                    for try await notification in notifications {
                        let message = Array(notification.payload.utf8)
                        for receive in receivers.withLock({ $0 }) { receive(message) }
                    }
                }
            } catch where !Task.isCancelled {
                logger.warning("cluster channel lost its connection; connecting again",
                               metadata: ["channel": "\(name)", "error": "\(PostgresLink.describe(error))"])
            } catch {}
            connection.withLock { $0 = nil }
            // A connection is closed before it is let go.
            try? await live?.close()
            if Task.isCancelled { return }
            try? await Task.sleep(for: .seconds(1))
        }
    }
}
