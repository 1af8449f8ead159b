import Logging
import PostgresNIO
import ReactorHosting

/// One transaction spanning many calls, on a connection of its own: the copies and backups that
/// read or write a whole store at once. Should the connection be lost, the transaction is gone
/// with it, and every later call fails rather than running outside it.
final class PostgresTransaction {
    let location: PostgresLocation
    let logger: Logger
    private let link: PostgresLink
    /// The connection the transaction runs on; nil once it has ended.
    private var connectionID: PostgresConnection.ID?

    /// Connects and runs `begin` (`BEGIN`, with its isolation level).
    init(location: PostgresLocation, begin: PostgresQuery = "BEGIN", timeout: Duration, logger: Logger) throws(SessionStoreError) {
        self.location = location
        self.logger = logger
        link = PostgresLink(location: location, logger: logger, timeout: timeout)
        connectionID = try link.run { connection in
            try connection.run(begin, logger: logger)
            return connection.id
        }
    }

    /// Runs `body` inside the transaction; fails when it has ended or its connection was lost.
    func run<Result>(_ body: (PostgresConnection) throws -> Result) throws(SessionStoreError) -> Result {
        let (location, expected) = (self.location, connectionID)
        return try link.run { connection in
            guard let expected, expected == connection.id else {
                throw SessionStoreError(.unavailable, "the connection to PostgreSQL at \(location) was lost; nothing was written")
            }
            return try body(connection)
        }
    }

    /// Commits, and closes the connection.
    func commit() throws(SessionStoreError) {
        let logger = self.logger
        defer { end() }
        _ = try run { connection in try connection.run("COMMIT", logger: logger) }
    }

    /// Rolls back (when the connection is still there), and closes it.
    func rollback() {
        let logger = self.logger
        if connectionID != nil { _ = try? run { connection in try connection.run("ROLLBACK", logger: logger) } }
        end()
    }

    private func end() {
        connectionID = nil
        link.close()
    }
}
