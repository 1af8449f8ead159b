import ReactorHosting

/// The tables of a SQLite session store: made when missing, given the columns later builds added
/// (GRDB keeps the same in a `DatabaseMigrator`), and checked before a file is used as a store.
enum SQLiteSchema {
    /// The schema this code writes; a store with a higher one is refused. 3: a session's row may
    /// be older than its journal rows, which carry its newest version until they are folded (a
    /// build of schema 2 would read such a row as the session, so it refuses the store). 4: the
    /// journal is a ring of slots whose folded rows stay until written over (a build of schema 3
    /// would take them for unfolded rows).
    static let version = 4
    /// What the `meta` table says a session store is, so another application's database is refused.
    static let application = "reactor-server sessions"

    /// Makes the tables that are missing, in one transaction, and adds the columns of later
    /// builds to a store made before them.
    /// - Returns: the journal's slots (``HistoryJournal/slots``): as the file says, else twice
    ///   `journalWindow`, recorded.
    static func prepare(_ writer: SQLiteConnection, journalWindow: Int) throws(SessionStoreError) -> Int64 {
        try writer.execute(
            """
            BEGIN IMMEDIATE;
            CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
            INSERT OR IGNORE INTO meta(key, value) VALUES ('application', '\(application)');
            INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', '\(version)');
            CREATE TABLE IF NOT EXISTS sessions(
                id TEXT PRIMARY KEY, type TEXT NOT NULL, version INTEGER NOT NULL, state BLOB NOT NULL,
                started_through INTEGER NOT NULL, last_activity INTEGER NOT NULL,
                published_ahead INTEGER NOT NULL DEFAULT 0, shown_through INTEGER NOT NULL DEFAULT 0,
                creation BLOB, subject TEXT) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS history(
                id TEXT NOT NULL, first_version INTEGER NOT NULL, last_version INTEGER NOT NULL,
                versions BLOB NOT NULL,
                PRIMARY KEY(id, first_version)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS actions(
                id TEXT NOT NULL, seq INTEGER NOT NULL, action BLOB NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY(id, seq)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS action_keys(
                id TEXT NOT NULL, key TEXT NOT NULL, seq INTEGER NOT NULL, digest INTEGER NOT NULL,
                PRIMARY KEY(id, key)) WITHOUT ROWID;
            \(journalTable);
            UPDATE meta SET value = '\(version)' WHERE key = 'schema';
            """)
        do throws(SessionStoreError) {
            try addColumnsOfLaterBuilds(writer)
            let slots = try journalSlots(writer, journalWindow: journalWindow)
            try writer.execute("COMMIT")
            return slots
        } catch {
            try? writer.execute("ROLLBACK")
            throw error
        }
    }

    /// The journal: row `row` in slot `row % slots` (``HistoryJournal``).
    static let journalTable = """
        CREATE TABLE IF NOT EXISTS journal(
            slot INTEGER PRIMARY KEY, row INTEGER NOT NULL, id TEXT NOT NULL, first_version INTEGER NOT NULL,
            last_version INTEGER NOT NULL, versions BLOB NOT NULL, started_through INTEGER, last_activity INTEGER)
        """

    /// The journal's slots as the file records them; for a new journal twice `journalWindow`.
    /// A journal of schema 2 or 3 (rows numbered, no slots: every row unfolded) is moved into a
    /// ring with room for twice its rows, renumbered in order; except the rows a schema 2 build
    /// wrote (no `started_through`: their session's row is as new as they are), whose versions
    /// go into the history as they are, one chunk each.
    private static func journalSlots(_ writer: SQLiteConnection, journalWindow: Int) throws(SessionStoreError) -> Int64 {
        let recorded = try writer.statement("SELECT value FROM meta WHERE key = 'journal_slots'")
        let found = try recorded.next() ? Int64(recorded.text(0)) : nil
        recorded.reset()
        let isRing = try hasColumn("slot", of: "journal", on: writer)
        if let found, found > 0, isRing { return found }
        var slots = 2 * Int64(max(1, journalWindow))
        if !isRing {
            let count = try writer.statement("SELECT count(*) FROM journal WHERE started_through IS NOT NULL")
            _ = try count.next()
            slots = max(slots, 2 * count.int64(0))
            count.reset()
            try writer.execute(
                """
                ALTER TABLE journal RENAME TO numbered_journal;
                \(journalTable);
                INSERT OR IGNORE INTO history(id, first_version, last_version, versions)
                SELECT id, first_version, last_version, versions FROM numbered_journal WHERE started_through IS NULL;
                INSERT INTO journal(slot, row, id, first_version, last_version, versions, started_through, last_activity)
                SELECT n % \(slots), n, id, first_version, last_version, versions, started_through, last_activity
                FROM (SELECT row_number() OVER (ORDER BY row) AS n, * FROM numbered_journal WHERE started_through IS NOT NULL);
                DROP TABLE numbered_journal;
                """)
        }
        try writer.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('journal_slots', '\(slots)')")
        return slots
    }

    /// Adds the sessions' `published_ahead`, `shown_through`, `creation` and `subject` columns and
    /// the actions' `attempts` to a store made before they existed, the index of sessions by
    /// subject (their owner), and the journal's `started_through` and `last_activity`. For the
    /// sessions' and actions' columns the schema number stays: a build without them reads and
    /// writes such a store as before and never sets them, and their defaults are what its
    /// sessions need (see ``StoredSession/publishedAhead``, ``StoredSession/shownThrough``,
    /// ``StoredSession/creation``, ``StoredSession/owner``: no earlier build recorded a subject,
    /// and ``PendingAction/attempts``).
    static func addColumnsOfLaterBuilds(_ connection: SQLiteConnection) throws(SessionStoreError) {
        for column in ["published_ahead", "shown_through"] where try !hasColumn(column, of: "sessions", on: connection) {
            try connection.execute("ALTER TABLE sessions ADD COLUMN \(column) INTEGER NOT NULL DEFAULT 0")
        }
        if try !hasColumn("creation", of: "sessions", on: connection) {
            try connection.execute("ALTER TABLE sessions ADD COLUMN creation BLOB")
        }
        if try !hasColumn("subject", of: "sessions", on: connection) {
            try connection.execute("ALTER TABLE sessions ADD COLUMN subject TEXT")
        }
        // No earlier build ran an action again only once it had counted the attempt.
        if try !hasColumn("attempts", of: "actions", on: connection) {
            try connection.execute("ALTER TABLE actions ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0")
        }
        // Null in rows an earlier build wrote, whose `sessions` row is as new as they are.
        if try hasTable("journal", on: connection) {
            for column in ["started_through", "last_activity"] where try !hasColumn(column, of: "journal", on: connection) {
                try connection.execute("ALTER TABLE journal ADD COLUMN \(column) INTEGER")
            }
        }
        // Sessions nobody in particular created are most of a store without authentication:
        // left out of the index, which then costs them nothing.
        try connection.execute("CREATE INDEX IF NOT EXISTS sessions_by_subject ON sessions(subject) WHERE subject IS NOT NULL")
    }

    /// Whether the database open on `connection` has `table`.
    static func hasTable(_ table: String, on connection: SQLiteConnection) throws(SessionStoreError) -> Bool {
        let statement = try connection.statement("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?")
        defer { statement.reset() }
        statement.bind(1, table)
        return try statement.next() && statement.int64(0) == 1
    }

    /// Whether `table` has `column` in the database open on `connection`.
    static func hasColumn(_ column: String, of table: String, on connection: SQLiteConnection) throws(SessionStoreError) -> Bool {
        let statement = try connection.statement("SELECT count(*) FROM pragma_table_info(?) WHERE name = ?")
        defer { statement.reset() }
        statement.bind(1, table)
        statement.bind(2, column)
        return try statement.next() && statement.int64(0) == 1
    }

    /// Refuses a database that holds tables but is not a session store, or a newer one; and an
    /// empty one unless `allowingEmpty` (a new store starts empty).
    static func check(_ connection: SQLiteConnection, allowingEmpty: Bool = true) throws(SessionStoreError) {
        if try tableCount(connection) == 0 {
            guard allowingEmpty else {
                throw SessionStoreError(.corrupt, "\(connection.path) holds no session store (no tables)")
            }
            return
        }
        if let refusal = try refusal(of: connection) { throw SessionStoreError(.corrupt, refusal) }
    }

    /// How many tables the database open on `connection` holds.
    static func tableCount(_ connection: SQLiteConnection) throws(SessionStoreError) -> Int64 {
        let tables = try connection.statement("SELECT count(*) FROM sqlite_master WHERE type = 'table'")
        defer { tables.reset() }
        return try tables.next() ? tables.int64(0) : 0
    }

    /// Why a database with tables is not a store this build may use: another application made
    /// it (no `meta` table, or another application's), or a newer reactor-server wrote it; nil
    /// when it is a session store. Throws when SQLite cannot read it.
    static func refusal(of connection: SQLiteConnection) throws(SessionStoreError) -> String? {
        let hasMeta = try connection.statement("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'")
        defer { hasMeta.reset() }
        guard try hasMeta.next(), hasMeta.int64(0) == 1 else {
            return "\(connection.path) is a SQLite database of something else, not a session store; it was left untouched"
        }
        let meta = try connection.statement("SELECT key, value FROM meta WHERE key IN ('application', 'schema')")
        var values: [String: String] = [:]
        while try meta.next() { values[meta.text(0)] = meta.text(1) }
        guard values["application"] == application else {
            return "\(connection.path) is a SQLite database of something else, not a session store; it was left untouched"
        }
        guard let schema = values["schema"].flatMap(Int.init), schema <= version else {
            return "\(connection.path) was written by a newer reactor-server (schema \(values["schema"] ?? "?")); it was left untouched"
        }
        return nil
    }
}
