import Locking
import Logging
import NIOCore
import PostgresNIO
import ReactorHosting
import Synchronization

/// One connection to PostgreSQL, lent to one caller at a time and made again when it was lost,
/// used synchronously from the store's own threads and callers' threads (never from an event
/// loop): a session store's calls block, as SQLite's do.
final class PostgresLink: Sendable {
    private static let nextID = Atomic<Int>(1)
    private let location: PostgresLocation
    private let logger: Logger
    private let connection = Locked<PostgresConnection?>(nil)

    init(location: PostgresLocation, logger: Logger) {
        self.location = location
        self.logger = logger
    }

    /// Runs `body` on the connection, connecting first when there is none or it was closed.
    /// Every error becomes a ``SessionStoreError`` naming the server (never a query's values).
    func run<Result>(_ body: (PostgresConnection) throws -> Result) throws(SessionStoreError) -> Result {
        let outcome = connection.withLock { current -> Swift.Result<Result, SessionStoreError> in
            do {
                let live: PostgresConnection
                if let existing = current, !existing.isClosed {
                    live = existing
                } else {
                    current = nil
                    live = try connect()
                    current = live
                }
                do {
                    return .success(try body(live))
                } catch {
                    if live.isClosed { current = nil }
                    throw error
                }
            } catch let error as SessionStoreError {
                return .failure(error)
            } catch {
                return .failure(SessionStoreError(.unavailable, "PostgreSQL at \(location): \(Self.describe(error))"))
            }
        }
        return try outcome.get()
    }

    /// Closes the connection, if one is open.
    func close() {
        Self.close(connection.withLock { current in
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
        return try PostgresConnection.connect(
            on: PostgresConnection.defaultEventLoopGroup.any(), configuration: location.connectionConfiguration,
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
