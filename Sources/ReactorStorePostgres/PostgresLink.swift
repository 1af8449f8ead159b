import Locking
import Logging
import NIOCore
import PostgresNIO
import ReactorHosting
import Synchronization

/// One connection to PostgreSQL, lent to one caller at a time and made again when it was lost,
/// used synchronously from the store's own threads and callers' threads (never from an event
/// loop): a session store's calls block, as SQLite's do.
///
/// A call that has no answer within ``timeout`` (a server that hangs, a network that drops
/// packets rather than refusing them) closes the connection, which fails what it was waiting
/// for: the caller hears ``SessionStoreError/Kind/unavailable`` instead of waiting for ever, and
/// the next call connects again.
final class PostgresLink: Sendable {
    /// How long a call may wait for the server by default: longer than any query takes here,
    /// short enough that a request waiting on a hung server is answered (`503`) within seconds.
    static let defaultTimeout: Duration = .seconds(10)

    private static let nextID = Atomic<Int>(1)
    private let location: PostgresLocation
    private let logger: Logger
    private let timeout: Duration
    private let connection = Locked<PostgresConnection?>(nil)

    /// ``timeout`` as NIO schedules it.
    private var timeLimit: TimeAmount { .nanoseconds(Int64(clamping: timeout.nanoseconds)) }

    init(location: PostgresLocation, logger: Logger, timeout: Duration = PostgresLink.defaultTimeout) {
        self.location = location
        self.logger = logger
        self.timeout = timeout
    }

    /// Runs `body` on the connection, connecting first when there is none or it was closed.
    /// Every error becomes a ``SessionStoreError`` naming the server (never a query's values).
    func run<Result>(_ body: (PostgresConnection) throws -> Result) throws(SessionStoreError) -> Result {
        try connection.withLock { current throws(SessionStoreError) -> Result in
            do {
                let live: PostgresConnection
                if let existing = current, !existing.isClosed {
                    live = existing
                } else {
                    current = nil
                    live = try connect()
                    current = live
                }
                let expired = Locked(false)
                let deadline = live.eventLoop.scheduleTask(in: timeLimit) {
                    expired.withLock { $0 = true }
                    live.close().whenComplete { _ in }
                }
                defer { deadline.cancel() }
                do {
                    return try body(live)
                } catch {
                    if expired.withLock({ $0 }) {
                        // Closing, perhaps not closed yet: never lent again.
                        current = nil
                        throw SessionStoreError(
                            .unavailable, "PostgreSQL at \(location) did not answer within \(timeout); the connection was closed")
                    }
                    if live.isClosed { current = nil }
                    throw error
                }
            } catch let error as SessionStoreError {
                throw error
            } catch {
                throw SessionStoreError(.unavailable, "PostgreSQL at \(location): \(Self.describe(error))")
            }
        }
    }

    /// Closes the connection, if one is open.
    func close() {
        Self.close(
            connection.withLock { current in
                defer { current = nil }
                return current
            })
    }

    deinit { close() }

    /// Closes `connection` without waiting, keeping it until it has closed (PostgresNIO requires
    /// a connection to be closed before it is let go).
    static func close(_ connection: PostgresConnection?) {
        guard let connection else { return }
        connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
    }

    private func connect() throws -> PostgresConnection {
        let id = Self.nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        var configuration = location.connectionConfiguration
        configuration.options.connectTimeout = timeLimit
        return try PostgresConnection.connect(
            on: PostgresConnection.defaultEventLoopGroup.any(), configuration: configuration,
            id: id, logger: logger
        ).wait()
    }

    /// What went wrong, in words: the server's message, or the connection's trouble. A query's
    /// values (session ids among them) are left out.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let info = error.serverInfo {
            return [info[.sqlState].map { "[\($0)]" }, info[.message]].compactMap { $0 }.joined(separator: " ")
        }
        if let underlying = error.underlying { return "\(error.code): \(underlying)" }
        return "\(error.code)"
    }
}

extension PostgresConnection {
    /// Runs `query` and waits for its result (on a thread that is not an event loop's).
    @discardableResult
    func run(_ query: PostgresQuery, logger: Logger) throws -> PostgresQueryResult {
        try self.query(query, logger: logger).wait()
    }
}

/// Several ``PostgresLink``s to one server, each call on a free one: calls from different
/// threads (activations served side by side) run at once, each waiting only for its own round
/// trips. A link is made on its first call, so links nobody needed cost no connection.
final class PostgresLinkPool: Sendable {
    private let links: LendingPool<PostgresLink>
    private let location: PostgresLocation
    private let logger: Logger
    private let timeout: Duration

    init(size: Int, location: PostgresLocation, logger: Logger, timeout: Duration = PostgresLink.defaultTimeout) {
        links = LendingPool(size: size)
        self.location = location
        self.logger = logger
        self.timeout = timeout
    }

    /// Runs `body` on a free link, waiting for one when all are in use.
    func run<Result>(_ body: (PostgresConnection) throws -> Result) throws(SessionStoreError) -> Result {
        let (location, logger, timeout) = (self.location, self.logger, self.timeout)
        let make = { () throws(SessionStoreError) -> PostgresLink in PostgresLink(location: location, logger: logger, timeout: timeout) }
        return try links.borrow(make: make) { (link: PostgresLink) throws(SessionStoreError) -> Result in
            try link.run(body)
        }
    }

    /// Closes every link's connection.
    func close() {
        links.forEachMade { $0.close() }
    }
}
