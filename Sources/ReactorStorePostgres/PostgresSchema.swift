import Logging
import PostgresNIO
import ReactorHosting

/// The tables of the PostgreSQL session store: made in a new database, or checked and given the
/// columns later builds added, in one transaction under an advisory lock so that nodes starting
/// together do not race.
enum PostgresSchema {
    /// The schema this code writes; a database with a higher one is refused.
    static let version = 1
    /// What `reactor_meta` says this database holds.
    static let application = "reactor-server sessions"
    /// The advisory lock key under which the schema is created.
    private static let schemaLock: Int64 = 0x5265_6163_746F_72

    /// Creates the tables in a new database, or checks that an existing one is a session store
    /// of a schema this code reads; all in one transaction, so a refused database is left as it was.
    static func prepare(on writer: PostgresLink, location: PostgresLocation, logger: Logger) throws(SessionStoreError) {
        try writer.run { connection in
            try connection.run("BEGIN", logger: logger)
            do {
                try connection.run("SELECT pg_advisory_xact_lock(\(Self.schemaLock))", logger: logger)
                try connection.run("CREATE TABLE IF NOT EXISTS reactor_meta(key text PRIMARY KEY, value text NOT NULL)", logger: logger)
                var values: [String: String] = [:]
                for row in try connection.run("SELECT key, value FROM reactor_meta", logger: logger).rows {
                    let (key, value) = try row.decode((String, String).self)
                    values[key] = value
                }
                if values.isEmpty {
                    try connection.run(
                        """
                        INSERT INTO reactor_meta(key, value) VALUES ('application', \(Self.application)), ('schema', \(String(Self.version)))
                        """, logger: logger)
                } else {
                    guard values["application"] == Self.application else {
                        throw SessionStoreError(
                            .corrupt, "\(location): its reactor_meta table belongs to another application; it was left untouched")
                    }
                    let schema = values["schema"].flatMap(Int.init) ?? 0
                    guard schema <= Self.version else {
                        throw SessionStoreError(
                            .corrupt, "\(location) was written by a newer reactor-server (schema \(schema)); it was left untouched")
                    }
                }
                for statement in Self.schemaStatements {
                    try connection.run(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                // Added after the first schema; the schema number stays (a build without the
                // columns never sets them, and reads and writes the table as before). Altered only
                // when missing: an ALTER TABLE locks the table against every node's queries.
                var present: Set<String> = []
                for row in try connection.run(
                    """
                    SELECT table_name::text || '.' || column_name::text FROM information_schema.columns
                    WHERE table_schema = current_schema() AND table_name IN ('reactor_sessions', 'reactor_actions')
                    """, logger: logger
                ).rows {
                    present.insert(try row.decode(String.self))
                }
                for (table, column, definition) in Self.columnsOfLaterBuilds where !present.contains("\(table).\(column)") {
                    try connection.run(
                        PostgresQuery(unsafeSQL: "ALTER TABLE \(table) ADD COLUMN \(column) \(definition)"),
                        logger: logger)
                }
                if !present.contains("reactor_sessions.subject") {
                    // Sessions nobody in particular created are left out of the index.
                    try connection.run(
                        "CREATE INDEX IF NOT EXISTS reactor_sessions_by_subject ON reactor_sessions(subject) WHERE subject IS NOT NULL",
                        logger: logger)
                }
                try connection.run("COMMIT", logger: logger)
            } catch {
                _ = try? connection.run("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    /// The columns added since the first schema, with their tables and definitions: whether the
    /// session's last process showed versions past the stored one (``StoredSession/publishedAhead``),
    /// and the highest version clients may have been shown before a copy from a restored backup
    /// (``StoredSession/shownThrough``), the JSON of the session's creation, empty for none
    /// (``StoredSession/creation``), the subject that created it, its owner
    /// (``StoredSession/owner``; `owner` is the node that holds the session's lease), and how many
    /// restarts began to run a pending action again (``PendingAction/attempts``).
    private static let columnsOfLaterBuilds = [
        ("reactor_sessions", "published_ahead", "boolean NOT NULL DEFAULT false"),
        ("reactor_sessions", "shown_through", "bigint NOT NULL DEFAULT 0"),
        ("reactor_sessions", "creation", "bytea NOT NULL DEFAULT ''::bytea"),
        ("reactor_sessions", "subject", "text"),
        ("reactor_actions", "attempts", "integer NOT NULL DEFAULT 0"),
    ]

    private static let schemaStatements = [
        """
        CREATE TABLE IF NOT EXISTS reactor_sessions(
            id text PRIMARY KEY, type text NOT NULL, version bigint NOT NULL, state bytea NOT NULL,
            started_through bigint NOT NULL, last_activity bigint NOT NULL,
            owner text, epoch bigint NOT NULL, lease_until timestamptz)
        """,
        """
        CREATE TABLE IF NOT EXISTS reactor_history(
            id text NOT NULL, first_version bigint NOT NULL, last_version bigint NOT NULL, versions bytea NOT NULL,
            PRIMARY KEY (id, first_version))
        """,
        """
        CREATE TABLE IF NOT EXISTS reactor_actions(
            id text NOT NULL, seq bigint NOT NULL, action bytea NOT NULL, attempts integer NOT NULL DEFAULT 0,
            PRIMARY KEY (id, seq))
        """,
        """
        CREATE TABLE IF NOT EXISTS reactor_action_keys(
            id text NOT NULL, key text NOT NULL, seq bigint NOT NULL, digest bigint NOT NULL, PRIMARY KEY (id, key))
        """,
    ]
}
