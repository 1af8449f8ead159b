import Logging
import NIOCore
import PostgresNIO
import ReactorHosting

/// Sessions copied from another store into a PostgreSQL database that holds none
/// (``SessionCopy``), in one transaction: the nodes see none of them until it commits, and a copy
/// cut off (killed, a lost connection) leaves the database as it was.
///
/// The schema is made or checked first, as a node does at start. The sessions are stored
/// unclaimed, so the node the proxy routes each id to claims it on its first request.
public final class PostgresSessionImport: SessionImport {
    /// Where the sessions go.
    public let location: PostgresLocation
    private let link: PostgresLink
    private let logger: Logger
    /// The connection the transaction runs on: should the link connect again, the transaction
    /// is gone, and nothing more may be written outside it.
    private var transaction: PostgresConnection.ID?
    /// Statements sent and not yet awaited: sessions are sent without waiting for each answer.
    private var unanswered: [EventLoopFuture<PostgresQueryResult>] = []
    /// How many statements (each a page of sessions) are sent before their answers are awaited.
    private static let pipelineDepth = 16

    /// Makes or checks the schema at `location` and begins the copy's transaction.
    /// - Throws: ``SessionStoreError`` when the database cannot be reached, is not a session
    ///   store, or holds sessions already.
    public init(location: PostgresLocation, timeout: Duration = PostgresSessionStore.defaultTimeout,
                logger: Logger = Logger(label: "reactor-server.postgres")) throws(SessionStoreError) {
        self.location = location
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .notice)
        self.logger = quiet
        link = PostgresLink(location: location, logger: quiet, timeout: timeout)
        try PostgresSessionStore.prepareSchema(on: link, location: location, logger: quiet)
        let found = try link.run { connection -> Int64 in
            try connection.run("BEGIN", logger: quiet)
            let rows = try connection.run("SELECT count(*) FROM reactor_sessions", logger: quiet).rows
            let count = try rows.first?.decode(Int64.self) ?? 0
            if count > 0 {
                _ = try? connection.run("ROLLBACK", logger: quiet)
            } else {
                transaction = connection.id
            }
            return count
        }
        guard found == 0 else {
            link.close()
            throw SessionStoreError(.unavailable, "\(location) holds \(found) session\(found == 1 ? "" : "s") already; "
                                    + "a copy never writes over a store, so copy into a database that holds none")
        }
    }

    /// Sends the sessions as one statement per table, rows passed as arrays, without waiting for
    /// the answers (``awaitAnswers()`` does, every few pages and at the commit).
    public func add(_ sessions: [CopiedSession]) throws(SessionStoreError) {
        guard !sessions.isEmpty else { return }
        var rows = Rows()
        for copied in sessions { rows.append(copied) }
        var queries: [PostgresQuery] = [
            """
            INSERT INTO reactor_sessions(id, type, version, state, started_through, last_activity, owner, epoch, lease_until,
                published_ahead, shown_through)
            SELECT id, type, version, state, started_through, last_activity, NULL, 0, NULL, published_ahead, shown_through
            FROM unnest(\(rows.ids)::text[], \(rows.types)::text[], \(rows.versions)::bigint[], \(rows.states)::bytea[],
                \(rows.startedThrough)::bigint[], \(rows.lastActivity)::bigint[], \(rows.publishedAhead)::boolean[],
                \(rows.shownThrough)::bigint[])
                AS t(id, type, version, state, started_through, last_activity, published_ahead, shown_through)
            """,
            """
            INSERT INTO reactor_history(id, first_version, last_version, versions)
            SELECT * FROM unnest(\(rows.ids)::text[], \(rows.firstVersions)::bigint[], \(rows.lastVersions)::bigint[],
                \(rows.chunks)::bytea[])
            """,
        ]
        if !rows.actionIDs.isEmpty {
            queries.append("""
                INSERT INTO reactor_actions(id, seq, action)
                SELECT * FROM unnest(\(rows.actionIDs)::text[], \(rows.actionSeqs)::bigint[], \(rows.actions)::bytea[])
                """)
        }
        if !rows.keyIDs.isEmpty {
            queries.append("""
                INSERT INTO reactor_action_keys(id, key, seq, digest)
                SELECT * FROM unnest(\(rows.keyIDs)::text[], \(rows.keys)::text[], \(rows.keySeqs)::bigint[],
                    \(rows.keyDigests)::bigint[])
                """)
        }
        try inTransaction { connection in
            for query in queries { unanswered.append(connection.query(query, logger: logger)) }
            if unanswered.count >= Self.pipelineDepth { try awaitAnswers() }
        }
    }

    /// Sessions as the columns of the store's tables, one array per column.
    private struct Rows {
        var ids: [String] = [], types: [String] = [], versions: [Int64] = [], states: [ByteBuffer] = []
        var startedThrough: [Int64] = [], lastActivity: [Int64] = [], publishedAhead: [Bool] = [], shownThrough: [Int64] = []
        /// Each session's history, as one chunk, with its first and last versions.
        var firstVersions: [Int64] = [], lastVersions: [Int64] = [], chunks: [ByteBuffer] = []
        var actionIDs: [String] = [], actionSeqs: [Int64] = [], actions: [ByteBuffer] = []
        var keyIDs: [String] = [], keys: [String] = [], keySeqs: [Int64] = [], keyDigests: [Int64] = []

        mutating func append(_ copied: CopiedSession) {
            let (id, session) = (copied.id, copied.session)
            ids.append(id)
            types.append(session.type)
            versions.append(Int64(bitPattern: session.version))
            states.append(ByteBuffer(bytes: session.state))
            startedThrough.append(Int64(bitPattern: session.startedThrough))
            lastActivity.append(session.lastActivity)
            publishedAhead.append(session.publishedAhead)
            shownThrough.append(Int64(bitPattern: session.shownThrough))
            // A session stored without a history keeps its state as its history.
            let entries = session.history.isEmpty
                ? [SessionBatch.Version(version: session.version, producedBy: 0, state: session.state)] : session.history
            firstVersions.append(Int64(bitPattern: entries[0].version))
            lastVersions.append(Int64(bitPattern: entries[entries.count - 1].version))
            chunks.append(ByteBuffer(bytes: HistoryChunk(entries: entries).encoded()))
            for pending in session.pendingActions {
                actionIDs.append(id)
                actionSeqs.append(Int64(bitPattern: pending.seq))
                actions.append(ByteBuffer(bytes: pending.action))
            }
            for key in session.rememberedKeys {
                keyIDs.append(id)
                keys.append(key.key)
                keySeqs.append(Int64(bitPattern: key.seq))
                keyDigests.append(Int64(bitPattern: key.digest))
            }
        }
    }

    public func commit() throws(SessionStoreError) {
        do throws(SessionStoreError) {
            try inTransaction { connection in
                try awaitAnswers()
                try connection.run("COMMIT", logger: logger)
            }
            transaction = nil
            link.close()
        } catch {
            abandon()
            throw error
        }
    }

    public func abandon() {
        // Answers to what was sent come first: the connection must be idle for the rollback.
        if transaction != nil {
            _ = try? inTransaction { connection in
                for future in unanswered { _ = try? future.wait() }
                unanswered = []
                try connection.run("ROLLBACK", logger: logger)
            }
        }
        transaction = nil
        link.close()
    }

    /// Waits for every statement sent; the first that failed fails the copy.
    private func awaitAnswers() throws {
        let sent = unanswered
        unanswered = []
        var failure: (any Error)?
        for future in sent {
            do { _ = try future.wait() } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    /// Runs `body` on the transaction's connection; fails when the link lost it.
    private func inTransaction(_ body: (PostgresConnection) throws -> Void) throws(SessionStoreError) {
        let location = self.location
        try link.run { connection in
            guard let transaction, transaction == connection.id else {
                throw SessionStoreError(.unavailable, "the connection to PostgreSQL at \(location) was lost during the copy; nothing was copied")
            }
            try body(connection)
        }
    }
}
