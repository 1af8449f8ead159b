import Logging
import PostgresNIO
import ReactorHosting

/// Every session of a PostgreSQL store as of one moment, read while the nodes serve them: the
/// source of `reactor-server backup` (``SessionCopy``). One read-only transaction at
/// `REPEATABLE READ` holds the moment, so a session written meanwhile is read as it was when the
/// snapshot began, and the snapshot claims nothing and writes nothing (not even the schema).
public final class PostgresSnapshot: SessionExporting {
    /// Where the sessions are.
    public let location: PostgresLocation
    private let historyCapacity: Int
    private let transaction: PostgresTransaction
    /// Whether the transaction is the snapshot's own, which ``close()`` ends.
    private let ownsTransaction: Bool

    /// Begins the snapshot.
    /// - Parameter historyCapacity: versions of each session's history read (at least the latest).
    /// - Throws: ``SessionStoreError`` when the database cannot be reached or holds no session store.
    public init(
        location: PostgresLocation, historyCapacity: Int, timeout: Duration = PostgresSessionStore.defaultTimeout,
        logger: Logger = Logger(label: "reactor-server.postgres")
    ) throws(SessionStoreError) {
        self.location = location
        self.historyCapacity = max(1, historyCapacity)
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .notice)
        transaction = try PostgresTransaction(
            location: location, begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
            timeout: timeout, logger: quiet)
        ownsTransaction = true
        do throws(SessionStoreError) {
            try transaction.run { connection in
                let found = try connection.run("SELECT to_regclass('reactor_sessions') IS NOT NULL", logger: quiet).rows.first
                guard try found?.decode(Bool.self) == true else {
                    throw SessionStoreError(.unavailable, "\(location) holds no session store (no reactor_sessions table)")
                }
            }
        } catch {
            transaction.rollback()
            throw error
        }
    }

    /// The sessions as `transaction`, which goes on after the snapshot, sees them: what a
    /// restore replaces, read under its lock.
    init(within transaction: PostgresTransaction, historyCapacity: Int) {
        location = transaction.location
        self.historyCapacity = max(1, historyCapacity)
        self.transaction = transaction
        ownsTransaction = false
    }

    public func storedIDs(after id: String?, limit: Int) throws(SessionStoreError) -> [String] {
        let logger = transaction.logger
        return try transaction.run { connection in
            try PostgresSessionStore.storedIDs(after: id, limit: limit, on: connection, logger: logger)
        }
    }

    public func export(ids: [String]) throws(SessionStoreError) -> [CopiedSession] {
        let (logger, capacity, location) = (transaction.logger, historyCapacity, location)
        return try transaction.run { connection in
            try PostgresSessionStore.export(ids: ids, on: connection, logger: logger, historyCapacity: capacity, location: location)
        }
    }

    /// The sessions nodes held a live claim on when the snapshot began.
    public func servedSessions() throws(SessionStoreError) -> Int {
        let logger = transaction.logger
        return try transaction.run { connection in try PostgresSessionStore.servedSessions(on: connection, logger: logger) }
    }

    /// Ends the snapshot's own transaction, which wrote nothing.
    public func close() {
        if ownsTransaction { transaction.rollback() }
    }
}
