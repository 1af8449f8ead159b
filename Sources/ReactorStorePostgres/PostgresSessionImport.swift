import Logging
import NIOCore
import PostgresNIO
import ReactorHosting

/// Sessions copied from another store into a PostgreSQL database (``SessionCopy``), in one
/// transaction: the nodes see none of them until it commits, and a copy cut off (killed, a lost
/// connection) leaves the database as it was.
///
/// The schema is made or checked first, as a node does at start. The sessions are stored
/// unclaimed, so the node the proxy routes each id to claims it on its first request.
///
/// Into a database that holds no sessions (`reactor-server copy`), or in place of all it holds
/// (`reactor-server restore`): then, as with a SQLite restore, a session the backup holds at an
/// earlier version than the database did goes back to it, but its versions go on past the
/// highest the replaced database may have shown (``StoredSession/shownThrough``).
public final class PostgresSessionImport: SessionImport {
    /// Where the sessions go.
    public let location: PostgresLocation
    /// Whether the sessions replace those the database held.
    public let replacing: Bool
    /// After a replacing import's ``commit()``: how many sessions went back to an earlier version
    /// than the database held.
    public private(set) var wentBack: Int?
    /// In a replacing import: how many sessions the database held, and were kept aside.
    public private(set) var replacedSessions = 0
    private let transaction: PostgresTransaction
    private var logger: Logger { transaction.logger }
    /// Statements sent and not yet awaited: sessions are sent without waiting for each answer.
    private var unanswered: [EventLoopFuture<PostgresQueryResult>] = []
    /// How many statements (each a page of sessions) are sent before their answers are awaited.
    private static let pipelineDepth = 16

    /// Makes or checks the schema at `location` and begins the import's transaction.
    /// - Parameters:
    ///   - replacing: whether the sessions replace all the database holds (no node may hold a
    ///     live claim on one); else it must hold none.
    ///   - keptAside: in a replacing import, makes where the sessions it replaces are copied
    ///     first, in the same transaction (so none written meanwhile is missed), committed before
    ///     any is replaced; not called when the database holds none.
    /// - Throws: ``SessionStoreError`` when the database cannot be reached, is not a session
    ///   store, holds sessions already (unless `replacing`), or nodes serve sessions.
    public init(
        location: PostgresLocation, replacing: Bool = false,
        keepingReplacedIn keptAside: (() throws(SessionStoreError) -> any SessionImport)? = nil,
        timeout: Duration = PostgresSessionStore.defaultTimeout,
        logger: Logger = Logger(label: "reactor-server.postgres")
    ) throws(SessionStoreError) {
        self.location = location
        self.replacing = replacing
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .notice)
        let link = PostgresLink(location: location, logger: quiet, timeout: timeout)
        try PostgresSchema.prepare(on: link, location: location, logger: quiet)
        link.close()
        transaction = try PostgresTransaction(location: location, timeout: timeout, logger: quiet)
        do throws(SessionStoreError) {
            if replacing {
                try transaction.run { connection in
                    // A node starting meanwhile waits for the commit rather than serve what is replaced.
                    try connection.run(
                        """
                        LOCK TABLE reactor_sessions, reactor_history, reactor_actions, reactor_action_keys IN ACCESS EXCLUSIVE MODE
                        """, logger: quiet)
                    let served = try PostgresSessionStore.servedSessions(on: connection, logger: quiet)
                    guard served == 0 else { throw SessionCopy.servedElsewhere(served) }
                }
                if let keptAside {
                    let replaced = PostgresSnapshot(within: transaction, historyCapacity: SessionCopy.wholeHistory)
                    if try !replaced.storedIDs(after: nil, limit: 1).isEmpty {
                        replacedSessions = try SessionCopy.copy(from: replaced, into: try keptAside(), whileServed: true).sessions
                    }
                }
                try transaction.run { connection in
                    // The highest version the database may have shown of each session, kept for the commit.
                    try connection.run(
                        """
                        CREATE TEMPORARY TABLE reactor_replaced_versions ON COMMIT DROP AS
                        SELECT id, greatest(version + CASE WHEN published_ahead THEN \(Int64(GroupCommitter.versionsShownAheadLimit)) ELSE 0 END,
                                            shown_through) AS shown
                        FROM reactor_sessions
                        """, logger: quiet)
                    try connection.run(
                        "TRUNCATE reactor_sessions, reactor_history, reactor_actions, reactor_action_keys",
                        logger: quiet)
                }
            } else {
                try transaction.run { connection in
                    let rows = try connection.run("SELECT count(*) FROM reactor_sessions", logger: quiet).rows
                    let count = try rows.first?.decode(Int64.self) ?? 0
                    guard count == 0 else {
                        throw SessionStoreError(
                            .unavailable,
                            "\(location) holds \(count) session\(count == 1 ? "" : "s") already; "
                                + "a copy never writes over a store, so copy into a database that holds none")
                    }
                }
            }
        } catch {
            transaction.rollback()
            throw error
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
                published_ahead, shown_through, creation, subject)
            SELECT id, type, version, state, started_through, last_activity, NULL, 0, NULL, published_ahead, shown_through, creation,
                nullif(subject, '')
            FROM unnest(\(rows.ids)::text[], \(rows.types)::text[], \(rows.versions)::bigint[], \(rows.states)::bytea[],
                \(rows.startedThrough)::bigint[], \(rows.lastActivity)::bigint[], \(rows.publishedAhead)::boolean[],
                \(rows.shownThrough)::bigint[], \(rows.creations)::bytea[], \(rows.subjects)::text[])
                AS t(id, type, version, state, started_through, last_activity, published_ahead, shown_through, creation, subject)
            """,
            """
            INSERT INTO reactor_history(id, first_version, last_version, versions)
            SELECT * FROM unnest(\(rows.ids)::text[], \(rows.firstVersions)::bigint[], \(rows.lastVersions)::bigint[],
                \(rows.chunks)::bytea[])
            """,
        ]
        if !rows.actionIDs.isEmpty {
            queries.append(
                """
                INSERT INTO reactor_actions(id, seq, action, attempts)
                SELECT * FROM unnest(\(rows.actionIDs)::text[], \(rows.actionSeqs)::bigint[], \(rows.actions)::bytea[],
                    \(rows.actionAttempts)::integer[])
                """)
        }
        if !rows.keyIDs.isEmpty {
            queries.append(
                """
                INSERT INTO reactor_action_keys(id, key, seq, digest)
                SELECT * FROM unnest(\(rows.keyIDs)::text[], \(rows.keys)::text[], \(rows.keySeqs)::bigint[],
                    \(rows.keyDigests)::bigint[])
                """)
        }
        try transaction.run { connection in
            for query in queries { unanswered.append(connection.query(query, logger: logger)) }
            if unanswered.count >= Self.pipelineDepth { try awaitAnswers() }
        }
    }

    /// Sessions as the columns of the store's tables, one array per column.
    private struct Rows {
        var ids: [String] = [], types: [String] = [], versions: [Int64] = [], states: [ByteBuffer] = []
        var startedThrough: [Int64] = [], lastActivity: [Int64] = [], publishedAhead: [Bool] = [], shownThrough: [Int64] = []
        var creations: [ByteBuffer] = [], subjects: [String] = []
        /// Each session's history, as one chunk, with its first and last versions.
        var firstVersions: [Int64] = [], lastVersions: [Int64] = [], chunks: [ByteBuffer] = []
        var actionIDs: [String] = [], actionSeqs: [Int64] = [], actions: [ByteBuffer] = [], actionAttempts: [Int32] = []
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
            creations.append(ByteBuffer(bytes: session.creation ?? []))
            subjects.append(session.owner ?? "")  // '' stands for none
            // A session stored without a history keeps its state as its history.
            let entries =
                session.history.isEmpty
                ? [SessionBatch.Version(version: session.version, producedBy: 0, state: session.state)] : session.history
            firstVersions.append(Int64(bitPattern: entries[0].version))
            lastVersions.append(Int64(bitPattern: entries[entries.count - 1].version))
            chunks.append(ByteBuffer(bytes: HistoryChunk(entries: entries).encoded()))
            for pending in session.pendingActions {
                actionIDs.append(id)
                actionSeqs.append(Int64(bitPattern: pending.seq))
                actions.append(ByteBuffer(bytes: pending.action))
                actionAttempts.append(Int32(clamping: pending.attempts))
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
            let replacing = self.replacing
            let logger = self.logger
            let wentBack = try transaction.run { connection -> Int? in
                try awaitAnswers()
                guard replacing else { return nil }
                let marked = try connection.run(
                    """
                    UPDATE reactor_sessions AS s SET shown_through = r.shown FROM reactor_replaced_versions AS r
                    WHERE s.id = r.id AND s.version < r.shown AND s.shown_through < r.shown
                    """, logger: logger)
                return marked.metadata.rows ?? 0
            }
            try transaction.commit()
            self.wentBack = wentBack
        } catch {
            abandon()
            throw error
        }
    }

    public func abandon() {
        // Answers to what was sent come first: the connection must be idle for the rollback.
        for future in unanswered { _ = try? future.wait() }
        unanswered = []
        transaction.rollback()
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
}
