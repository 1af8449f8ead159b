import CSQLite
import Foundation
import Locking
import ReactorHosting

/// The embedded session store: one SQLite file in WAL mode, every commit synced to disk
/// (`synchronous=FULL`), through SQLite's C API.
///
/// Two connections: one writes (the commit thread, and expiry), one reads (activations), so that
/// a read never waits for a commit's sync to disk.
///
/// A commit appends each session's new versions to a journal table, at its end, rather than
/// inserting them among that session's history: a commit then writes a page or two for the
/// history, whichever sessions it touched, instead of two or three pages for each. A session's
/// journal rows are folded into its history all at once when the oldest of them falls out of the
/// journal's window (``HistoryJournal``).
///
/// Opening refuses, and leaves untouched, a file that is not a SQLite database, a database that
/// is not a session store, or one written by a newer schema; and a store another process has
/// open (``StoreFileLock``).
public final class SQLiteSessionStore: SessionStore, SessionExporting {
    /// The schema this code writes; a store with a higher one is refused.
    static let schemaVersion = 2
    /// What the `meta` table says a session store is, so another application's database is refused.
    static let application = "reactor-server sessions"

    /// The database file.
    public let path: String
    private let writer: Locked<SQLiteConnection>
    /// Loads and look-ups, several at once (activations are served side by side), each
    /// connection opened on first use.
    private let readers = LendingPool<SQLiteConnection>(size: SQLiteSessionStore.readerConnections)
    /// Connections reading sessions at once, at most.
    static let readerConnections = 4
    private let historyCapacity: Int
    /// The journal's rows not yet folded into the history table. The writer changes it; a load
    /// reads a session's rows from it before its read transaction begins.
    private let journal: Locked<HistoryJournal>
    /// How many journal rows are kept before the oldest are folded and deleted.
    private let journalWindow: Int
    /// Copies the write-ahead log into the database beside the commits.
    private let checkpointer: WALCheckpointer
    /// Keeps other servers off the file while this store is open.
    private let lock: StoreFileLock

    /// Opens the store at `path`, creating it (and its directory) when missing.
    /// - Parameters:
    ///   - historyCapacity: versions kept per session for replay (at least the latest).
    ///   - maxPageCount: a cap on the file's size in pages (SQLite's `max_page_count`); a commit
    ///     past it fails as a full disk would.
    ///   - journalWindow: how many rows of new versions the journal keeps before it folds the
    ///     oldest into the sessions' history.
    /// - Throws: ``SessionStoreError`` naming the path and what is wrong with it.
    public init(path: String, historyCapacity: Int, maxPageCount: Int? = nil, journalWindow: Int = 1024) throws(SessionStoreError) {
        self.path = path
        self.historyCapacity = max(1, historyCapacity)
        self.journalWindow = max(1, journalWindow)
        try Self.checkFile(at: path)
        lock = try StoreFileLock(storePath: path)
        try Self.createPrivately(path)
        let writer = try SQLiteConnection(path: path, create: true)
        try Self.checkSchema(writer)
        try writer.execute("PRAGMA journal_mode=WAL")
        try writer.execute("PRAGMA synchronous=FULL")
        // Checkpoints run beside the commits (``WALCheckpointer``), not inside one.
        try writer.execute("PRAGMA wal_autocheckpoint=0")
        if let maxPageCount { try writer.execute("PRAGMA max_page_count=\(maxPageCount)") }
        try writer.execute("""
            BEGIN IMMEDIATE;
            CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
            INSERT OR IGNORE INTO meta(key, value) VALUES ('application', '\(Self.application)');
            INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', '\(Self.schemaVersion)');
            CREATE TABLE IF NOT EXISTS sessions(
                id TEXT PRIMARY KEY, type TEXT NOT NULL, version INTEGER NOT NULL, state BLOB NOT NULL,
                started_through INTEGER NOT NULL, last_activity INTEGER NOT NULL,
                published_ahead INTEGER NOT NULL DEFAULT 0, shown_through INTEGER NOT NULL DEFAULT 0,
                creation BLOB) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS history(
                id TEXT NOT NULL, first_version INTEGER NOT NULL, last_version INTEGER NOT NULL,
                versions BLOB NOT NULL,
                PRIMARY KEY(id, first_version)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS actions(
                id TEXT NOT NULL, seq INTEGER NOT NULL, action BLOB NOT NULL,
                PRIMARY KEY(id, seq)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS action_keys(
                id TEXT NOT NULL, key TEXT NOT NULL, seq INTEGER NOT NULL, digest INTEGER NOT NULL,
                PRIMARY KEY(id, key)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS journal(
                row INTEGER PRIMARY KEY, id TEXT NOT NULL, first_version INTEGER NOT NULL,
                last_version INTEGER NOT NULL, versions BLOB NOT NULL);
            UPDATE meta SET value = '\(Self.schemaVersion)' WHERE key = 'schema';
            """)
        do throws(SessionStoreError) {
            try Self.addColumnsOfLaterBuilds(writer)
            try writer.execute("COMMIT")
        } catch {
            try? writer.execute("ROLLBACK")
            throw error
        }
        journal = Locked(try Self.readJournal(writer))
        checkpointer = try WALCheckpointer(path: path)
        self.writer = Locked(writer)
        // One reader now: a file that a second connection cannot open fails here, at start.
        try reading { (_: SQLiteConnection) throws(SessionStoreError) in }
    }

    deinit {
        checkpointer.stop()
    }

    /// Adds the sessions' `published_ahead`, `shown_through` and `creation` columns to a store
    /// made before they existed. The schema number stays: a build without them reads and writes
    /// such a store as before and never sets them, and their defaults are what its sessions need
    /// (see ``StoredSession/publishedAhead``, ``StoredSession/shownThrough`` and
    /// ``StoredSession/creation``).
    static func addColumnsOfLaterBuilds(_ connection: SQLiteConnection) throws(SessionStoreError) {
        for column in ["published_ahead", "shown_through"] where try !hasColumn(column, of: "sessions", on: connection) {
            try connection.execute("ALTER TABLE sessions ADD COLUMN \(column) INTEGER NOT NULL DEFAULT 0")
        }
        if try !hasColumn("creation", of: "sessions", on: connection) {
            try connection.execute("ALTER TABLE sessions ADD COLUMN creation BLOB")
        }
    }

    /// Whether `table` has `column` in the database open on `connection`.
    static func hasColumn(_ column: String, of table: String, on connection: SQLiteConnection) throws(SessionStoreError) -> Bool {
        let statement = try connection.statement("SELECT count(*) FROM pragma_table_info(?) WHERE name = ?")
        defer { statement.reset() }
        statement.bind(1, table)
        statement.bind(2, column)
        return try statement.next() && statement.int64(0) == 1
    }

    /// Makes the directory holding the store at `path` when it is missing, its owner's only
    /// (the store's ids are the sessions' credentials); refuses a file in its place.
    static func makeDirectory(of path: String) throws(SessionStoreError) {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw SessionStoreError(.unavailable, "cannot create the session store \(path): \(directory.path) is not a directory")
            }
        } else {
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o700])
            } catch {
                throw SessionStoreError(.unavailable, "cannot create the directory of the session store \(path): \(error.localizedDescription)")
            }
        }
    }

    /// Refuses an existing file that does not start as a SQLite database, before SQLite opens
    /// it (and before anything could be written to it).
    private static func checkFile(at path: String) throws(SessionStoreError) {
        try makeDirectory(of: path)
        guard let handle = FileHandle(forReadingAtPath: path) else {
            if FileManager.default.fileExists(atPath: path) {
                throw SessionStoreError(.unavailable, "cannot read the session store \(path): permission denied")
            }
            return
        }
        defer { try? handle.close() }
        let header = (try? handle.read(upToCount: 16)) ?? Data()
        guard header.isEmpty || header == Data("SQLite format 3\0".utf8) else {
            throw SessionStoreError(.corrupt, "\(path) is not a SQLite database (its first bytes are not SQLite's header); it was left untouched")
        }
    }

    /// Makes the store's file, when there is none yet, readable and writable by its owner only:
    /// its ids are the sessions' credentials. SQLite gives its log and index files the
    /// database's permissions.
    /// (Called with the store's lock held, so no other server makes it meanwhile.)
    private static func createPrivately(_ path: String) throws(SessionStoreError) {
        guard !FileManager.default.fileExists(atPath: path) else { return }
        guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw SessionStoreError(.unavailable, "cannot create the session store \(path)")
        }
    }

    /// Whether users other than the file's owner may read the store (its group or others have
    /// any permission on it): its ids are the sessions' credentials.
    public var isReadableByOthers: Bool {
        var status = stat()
        return stat(path, &status) == 0 && status.st_mode & 0o077 != 0
    }

    /// Refuses a database that holds tables but is not a session store, or a newer one; and an
    /// empty one unless `allowingEmpty` (a new store starts empty).
    static func checkSchema(_ connection: SQLiteConnection, allowingEmpty: Bool = true) throws(SessionStoreError) {
        let tables = try connection.statement("SELECT count(*) FROM sqlite_master WHERE type = 'table'")
        defer { tables.reset() }
        guard try tables.next() else { return }
        if tables.int64(0) == 0 {
            guard allowingEmpty else {
                throw SessionStoreError(.corrupt, "\(connection.path) holds no session store (no tables)")
            }
            return
        }
        let hasMeta = try connection.statement("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'")
        defer { hasMeta.reset() }
        guard try hasMeta.next(), hasMeta.int64(0) == 1 else {
            throw SessionStoreError(.corrupt, "\(connection.path) is a SQLite database of something else, not a session store; it was left untouched")
        }
        let meta = try connection.statement("SELECT key, value FROM meta WHERE key IN ('application', 'schema')")
        var values: [String: String] = [:]
        while try meta.next() { values[meta.text(0)] = meta.text(1) }
        guard values["application"] == application else {
            throw SessionStoreError(.corrupt, "\(connection.path) is a SQLite database of something else, not a session store; it was left untouched")
        }
        guard let schema = values["schema"].flatMap(Int.init), schema <= schemaVersion else {
            throw SessionStoreError(.corrupt, "\(connection.path) was written by a newer reactor-server (schema \(values["schema"] ?? "?")); it was left untouched")
        }
    }

    // MARK: - Writing

    public func commit(_ writes: [SessionWrite]) throws(SessionStoreError) -> Set<String> {
        try writer.withLock { connection throws(SessionStoreError) -> Set<String> in
            try connection.execute("BEGIN IMMEDIATE")
            do throws(SessionStoreError) {
                var settled: [String] = []
                let lastRow = journal.withLock { $0.lastRow }
                let stale = try apply(writes, on: connection, settling: &settled)
                let appended = Int(journal.withLock { $0.lastRow } - lastRow)
                let deletedThrough = try foldOldestJournalRows(appended: appended, on: connection, settling: &settled)
                try connection.execute("COMMIT")
                var frames: Int32 = 0
                var highest: Int32 = 0
                sqlite3_db_status(connection.handle, SQLITE_DBSTATUS_CACHE_WRITE, &frames, &highest, 1)
                if checkpointer.committed(frames: Int(frames)) { checkpointer.finish(on: connection) }
                // Only now: a load that read the journal before this commit must still find the
                // folded rows there, and one that reads it after finds them in the history.
                journal.withLock { journal in
                    for id in settled { journal.forget(id) }
                    if let deletedThrough { journal.deleted(through: deletedThrough) }
                }
                return stale
            } catch {
                try? connection.execute("ROLLBACK")
                // The rows numbered for the batch were not written.
                if let rows = try? Self.readJournal(connection) { journal.withLock { $0 = rows } }
                throw error
            }
        }
    }

    /// The journal's rows as the table holds them, all unfolded (those of sessions folded before
    /// a crash are folded again, to the same keys).
    private static func readJournal(_ connection: SQLiteConnection) throws(SessionStoreError) -> HistoryJournal {
        let statement = try connection.statement("SELECT row, id FROM journal ORDER BY row")
        defer { statement.reset() }
        var rows: [(row: Int64, id: String)] = []
        while try statement.next() { rows.append((statement.int64(0), statement.text(1))) }
        return HistoryJournal(rows: rows)
    }

    /// The writes of one batch, inside its transaction, in order (planned by ``SessionBatch``).
    /// A session's versions in the batch become one journal row (a chunk) and one update of its
    /// row; the sessions it deletes are added to `settled`, whose journal entries go once the
    /// batch is committed.
    private func apply(_ writes: [SessionWrite], on connection: SQLiteConnection,
                       settling settled: inout [String]) throws(SessionStoreError) -> Set<String> {
        let batch = SessionBatch(writes)
        var stale: Set<String> = []
        /// Whether each session touched so far exists (created, deleted or looked up in this batch).
        var exists: [String: Bool] = [:]
        func sessionExists(_ id: String) throws(SessionStoreError) -> Bool {
            if let known = exists[id] { return known }
            let found = try contains(id: id, on: connection)
            exists[id] = found
            return found
        }
        for write in batch.writes {
            switch write {
            case .create(let id, let type, let state, let lastActivity, let publishingAhead, let creation):
                let session = try connection.statement("""
                    INSERT INTO sessions(id, type, version, state, started_through, last_activity, published_ahead, creation)
                    VALUES (?, ?, 0, ?, 0, ?, ?, ?)
                    """)
                session.bind(1, id)
                session.bind(2, type)
                session.bind(3, blob: state)
                session.bind(4, lastActivity)
                session.bind(5, Int64(publishingAhead ? 1 : 0))
                session.bind(6, optionalBlob: creation)
                try session.run()
                exists[id] = true
                try insertChunk(id: id, HistoryChunk(entries: [SessionBatch.Version(version: 0, producedBy: 0, state: state)]), on: connection)
            case .accept(let id, let seq, let action, let key):
                if let key, try sessionExists(id) { try remember(key, of: id, on: connection) }
                guard !batch.settlesLater(id: id, seq: seq), try sessionExists(id) else { continue }
                let statement = try connection.statement("INSERT OR REPLACE INTO actions(id, seq, action) VALUES (?, ?, ?)")
                statement.bind(1, id)
                statement.bind(2, seq)
                statement.bind(3, blob: action)
                try statement.run()
            case .settle(let id, let seq):
                guard !batch.acceptedInBatch(id: id, seq: seq) else { continue }
                let statement = try connection.statement("DELETE FROM actions WHERE id = ? AND seq = ?")
                statement.bind(1, id)
                statement.bind(2, seq)
                try statement.run()
            case .version(let id, let version, let state, let startedThrough, _, let lastActivity):
                // Written once, at the session's last version in the batch.
                guard let entries = batch.versions(of: id, endingAt: version) else { continue }
                let session = try connection.statement("""
                    UPDATE sessions SET version = ?1, state = ?2, started_through = ?3, last_activity = max(last_activity, ?4)
                    WHERE id = ?5 AND version < ?6
                    """)
                session.bind(1, version)
                session.bind(2, blob: state)
                session.bind(3, startedThrough)
                session.bind(4, lastActivity)
                session.bind(5, id)
                session.bind(6, entries[0].version)
                try session.run()
                if session.changes == 0 {
                    if try sessionExists(id) { stale.insert(id) }
                    continue
                }
                exists[id] = true
                let row = journal.withLock { $0.append(id: id) }
                let append = try connection.statement("""
                    INSERT INTO journal(row, id, first_version, last_version, versions) VALUES (?, ?, ?, ?, ?)
                    """)
                append.bind(1, row)
                append.bind(2, id)
                append.bind(3, entries[0].version)
                append.bind(4, version)
                append.bind(5, blob: HistoryChunk(entries: entries).encoded())
                try append.run()
            case .touch(let id, let lastActivity):
                let statement = try connection.statement("UPDATE sessions SET last_activity = max(last_activity, ?) WHERE id = ?")
                statement.bind(1, lastActivity)
                statement.bind(2, id)
                try statement.run()
            case .delete(let id):
                try delete(id: id, on: connection)
                settled.append(id)
                exists[id] = false
            case .release(let id):
                // One process owns the file: nothing to hand over; what it showed is committed.
                let statement = try connection.statement("UPDATE sessions SET published_ahead = 0 WHERE id = ? AND published_ahead <> 0")
                statement.bind(1, id)
                try statement.run()
            case .publishingAhead(let id):
                let statement = try connection.statement("UPDATE sessions SET published_ahead = 1 WHERE id = ?")
                statement.bind(1, id)
                try statement.run()
            }
        }
        return stale
    }

    private func insertChunk(id: String, _ chunk: HistoryChunk, on connection: SQLiteConnection) throws(SessionStoreError) {
        try insertChunk(id: id, firstVersion: chunk.entries[0].version, lastVersion: chunk.entries[chunk.entries.count - 1].version,
                        versions: chunk.encoded(), on: connection)
    }

    private func insertChunk(id: String, firstVersion: UInt64, lastVersion: UInt64, versions: [UInt8],
                             on connection: SQLiteConnection) throws(SessionStoreError) {
        let statement = try connection.statement("""
            INSERT OR REPLACE INTO history(id, first_version, last_version, versions) VALUES (?, ?, ?, ?)
            """)
        statement.bind(1, id)
        statement.bind(2, firstVersion)
        statement.bind(3, lastVersion)
        statement.bind(4, blob: versions)
        try statement.run()
    }

    /// Folds the sessions whose oldest journal row fell out of the window into their history,
    /// oldest first, until it has folded twice the rows the commit appended (at least one
    /// session): the journal keeps near its window, and sessions whose rows fall out together do
    /// not make one commit long. Then deletes the journal's rows before the oldest still unfolded,
    /// as one range.
    /// - Returns: the last row deleted, if any were.
    private func foldOldestJournalRows(appended: Int, on connection: SQLiteConnection,
                                       settling settled: inout [String]) throws(SessionStoreError) -> Int64? {
        let (cutoff, due) = journal.withLock { journal -> (Int64, [(id: String, rows: Int)]) in
            let cutoff = journal.lastRow - Int64(journalWindow)
            guard cutoff > journal.deletedThrough else { return (0, []) }
            return (cutoff, journal.sessions(withRowsThrough: cutoff).map { ($0, journal.rows[$0]?.count ?? 0) })
        }
        guard !due.isEmpty else { return nil }
        var folded = 0
        var through = cutoff
        for (index, session) in due.enumerated() {
            if index > 0 && folded >= 2 * appended {
                // Rows from the oldest session left unfolded on stay.
                through = min(cutoff, (journal.withLock { $0.rows[session.id]?.first } ?? cutoff + 1) - 1)
                break
            }
            try fold(session.id, on: connection)
            settled.append(session.id)
            folded += session.rows
        }
        guard through > journal.withLock({ $0.deletedThrough }) else { return nil }
        let delete = try connection.statement("DELETE FROM journal WHERE row <= ?")
        delete.bind(1, through)
        try delete.run()
        return through
    }

    /// Copies the session's unfolded journal rows into its history, each as the chunk it is, and
    /// drops the history's chunks older than it keeps. A deleted session's rows are left to the
    /// range deletion.
    private func fold(_ id: String, on connection: SQLiteConnection) throws(SessionStoreError) {
        guard try contains(id: id, on: connection) else { return }
        let rows = journal.withLock { $0.rows[id] ?? [] }
        let read = try connection.statement("SELECT first_version, last_version, versions FROM journal WHERE row = ?")
        var latest: UInt64 = 0
        for row in rows {
            read.reset()
            read.bind(1, row)
            guard try read.next() else { continue }
            let lastVersion = read.uint64(1)
            try insertChunk(id: id, firstVersion: read.uint64(0), lastVersion: lastVersion, versions: read.blob(2), on: connection)
            latest = max(latest, lastVersion)
        }
        read.reset()
        guard latest >= UInt64(historyCapacity) else { return }
        let trim = try connection.statement("DELETE FROM history WHERE id = ? AND last_version <= ?")
        trim.bind(1, id)
        trim.bind(2, latest - UInt64(historyCapacity))
        try trim.run()
    }

    /// Keeps an action's idempotency key, and now and then forgets the session's keys of
    /// actions that left the window (``RememberedKey/window``).
    private func remember(_ key: RememberedKey, of id: String, on connection: SQLiteConnection) throws(SessionStoreError) {
        let insert = try connection.statement("INSERT OR REPLACE INTO action_keys(id, key, seq, digest) VALUES (?, ?, ?, ?)")
        insert.bind(1, id)
        insert.bind(2, key.key)
        insert.bind(3, key.seq)
        insert.bind(4, key.digest)
        try insert.run()
        guard let through = RememberedKey.forgottenThrough(accepting: key.seq) else { return }
        let forget = try connection.statement("DELETE FROM action_keys WHERE id = ? AND seq <= ?")
        forget.bind(1, id)
        forget.bind(2, through)
        try forget.run()
    }

    private func delete(id: String, on connection: SQLiteConnection) throws(SessionStoreError) {
        for table in ["sessions", "history", "actions", "action_keys"] {
            let statement = try connection.statement("DELETE FROM \(table) WHERE id = ?")
            statement.bind(1, id)
            try statement.run()
        }
        let rows = try connection.statement("DELETE FROM journal WHERE row = ?")
        for row in journal.withLock({ $0.rows[id] ?? [] }) {
            rows.reset()
            rows.bind(1, row)
            try rows.run()
        }
    }

    public func deleteIdle(before cutoff: Int64, excluding: Set<String>) throws(SessionStoreError) -> [String] {
        // Found by a scan on the reading connection, which never holds up a commit: no index on
        // last activity, which every version would otherwise rewrite.
        let ids = try reading { connection throws(SessionStoreError) -> [String] in
            let idle = try connection.statement("SELECT id FROM sessions WHERE last_activity < ?")
            idle.bind(1, cutoff)
            var ids: [String] = []
            while try idle.next() {
                let id = idle.text(0)
                if !excluding.contains(id) { ids.append(id) }
            }
            return ids
        }
        if ids.isEmpty { return [] }
        return try writer.withLock { connection throws(SessionStoreError) -> [String] in
            var deleted: [String] = []
            try connection.execute("BEGIN IMMEDIATE")
            do throws(SessionStoreError) {
                // Still idle: a session touched since the scan keeps its newer activity.
                let stillIdle = try connection.statement("SELECT 1 FROM sessions WHERE id = ? AND last_activity < ?")
                for id in ids {
                    stillIdle.reset()
                    stillIdle.bind(1, id)
                    stillIdle.bind(2, cutoff)
                    let idle = try stillIdle.next()
                    stillIdle.reset()
                    if idle {
                        try delete(id: id, on: connection)
                        deleted.append(id)
                    }
                }
                try connection.execute("COMMIT")
            } catch {
                try? connection.execute("ROLLBACK")
                throw error
            }
            journal.withLock { journal in for id in deleted { journal.forget(id) } }
            return deleted
        }
    }

    // MARK: - Reading

    public func load(id: String) throws(SessionStoreError) -> StoredSession? {
        // A commit between reading the journal's row numbers and the read transaction can add a
        // version whose row they do not name: the history read would then end before the
        // session's version. Read again, rows first: a commit numbers its rows before it ends.
        for attempt in 1...Self.loadAttempts {
            guard let (stored, complete) = try load(id: id, journalRows: journal.withLock { $0.rows[id] ?? [] }) else {
                return nil
            }
            if complete || attempt == Self.loadAttempts { return stored }
        }
        return nil
    }

    /// Loads, at most, for one session read while commits keep adding versions to it.
    static let loadAttempts = 8

    /// Loads the session with these journal rows (read before the transaction begins: rows
    /// folded since are then in the history it reads), and whether its history reaches its version.
    private func load(id: String, journalRows: [Int64]) throws(SessionStoreError) -> (StoredSession, complete: Bool)? {
        try reading { connection throws(SessionStoreError) -> (StoredSession, complete: Bool)? in
            // One read transaction, so the reads see one commit.
            try connection.execute("BEGIN")
            defer { try? connection.execute("COMMIT") }
            let session = try connection.statement("""
                SELECT type, version, state, started_through, last_activity, published_ahead, shown_through, creation
                FROM sessions WHERE id = ?
                """)
            session.bind(1, id)
            defer { session.reset() }
            guard try session.next() else { return nil }
            var stored = StoredSession(type: session.text(0), version: session.uint64(1), state: session.blob(2),
                                       startedThrough: session.uint64(3), lastActivity: session.int64(4),
                                       history: [], pendingActions: [], publishedAhead: session.int64(5) != 0,
                                       shownThrough: session.uint64(6), creation: session.optionalBlob(7))
            let history = try connection.statement("SELECT versions FROM history WHERE id = ? ORDER BY first_version")
            history.bind(1, id)
            var entries: [SessionBatch.Version] = []
            while try history.next() {
                guard let chunk = HistoryChunk(decoding: history.blob(0)) else {
                    history.reset()
                    throw SessionStoreError(.corrupt, "\(path): the stored history of a session is damaged")
                }
                entries += chunk.entries
            }
            // Newest first, until they hold as many versions as the history keeps: a busy session
            // can have a whole window of rows there.
            let journaled = try connection.statement("SELECT versions FROM journal WHERE row = ? AND id = ?")
            var newest: [[SessionBatch.Version]] = []
            var journaledVersions = 0
            for row in journalRows.reversed() where journaledVersions < historyCapacity {
                journaled.reset()
                journaled.bind(1, row)
                journaled.bind(2, id)
                guard try journaled.next() else { continue }
                guard let chunk = HistoryChunk(decoding: journaled.blob(0)) else {
                    journaled.reset()
                    throw SessionStoreError(.corrupt, "\(path): the stored history of a session is damaged")
                }
                newest.append(chunk.entries)
                journaledVersions += chunk.entries.count
            }
            journaled.reset()
            entries += newest.reversed().joined()
            // A version folded into the history may also be read from the journal.
            entries.sort { $0.version < $1.version }
            entries = entries.enumerated().compactMap { index, entry in
                index > 0 && entries[index - 1].version == entry.version ? nil : entry
            }
            let actions = try connection.statement("SELECT seq, action FROM actions WHERE id = ? ORDER BY seq")
            actions.bind(1, id)
            var pending: [(seq: UInt64, action: [UInt8])] = []
            while try actions.next() { pending.append((actions.uint64(0), actions.blob(1))) }
            actions.reset()
            let keys = try connection.statement("SELECT key, seq, digest FROM action_keys WHERE id = ?")
            keys.bind(1, id)
            defer { keys.reset() }
            var remembered: [RememberedKey] = []
            while try keys.next() {
                remembered.append(RememberedKey(key: keys.text(0), seq: keys.uint64(1), digest: keys.uint64(2)))
            }
            let complete = (entries.last?.version ?? stored.version) >= stored.version
            stored.restore(versions: entries, capacity: historyCapacity, pendingActions: pending, keys: remembered)
            return (stored, complete)
        }
    }

    /// Sessions at a time in ascending id order, for a copy to another store.
    public func storedIDs(after id: String?, limit: Int) throws(SessionStoreError) -> [String] {
        try reading { connection throws(SessionStoreError) -> [String] in
            let statement = try connection.statement("SELECT id FROM sessions WHERE id > ? ORDER BY id LIMIT ?")
            defer { statement.reset() }
            statement.bind(1, id ?? "")
            statement.bind(2, Int64(max(0, limit)))
            var ids: [String] = []
            while try statement.next() { ids.append(statement.text(0)) }
            return ids
        }
    }

    /// The sessions as ``load(id:)`` reads them: nothing here claims a session.
    public func export(ids: [String]) throws(SessionStoreError) -> [CopiedSession] {
        var sessions: [CopiedSession] = []
        for id in ids {
            if let session = try load(id: id) { sessions.append(CopiedSession(id: id, session: session)) }
        }
        return sessions
    }

    public func contains(id: String) throws(SessionStoreError) -> Bool {
        try reading { connection throws(SessionStoreError) -> Bool in try contains(id: id, on: connection) }
    }

    private func contains(id: String, on connection: SQLiteConnection) throws(SessionStoreError) -> Bool {
        let statement = try connection.statement("SELECT 1 FROM sessions WHERE id = ?")
        statement.bind(1, id)
        defer { statement.reset() }
        return try statement.next()
    }

    /// How many sessions are stored.
    public func count() throws(SessionStoreError) -> Int {
        try reading { connection throws(SessionStoreError) -> Int in try Self.countSessions(on: connection) }
    }

    /// How many sessions the store open on `connection` holds (a store's, a backup's or a copy's).
    static func countSessions(on connection: SQLiteConnection) throws(SessionStoreError) -> Int {
        let statement = try connection.statement("SELECT count(*) FROM sessions")
        defer { statement.reset() }
        _ = try statement.next()
        return Int(statement.int64(0))
    }

    /// The database file and its write-ahead log (its index file, `-shm`, is a mapping in memory
    /// and not counted).
    public func diskUsage() throws(SessionStoreError) -> Int? {
        try Self.diskUsage(of: path)
    }

    /// What the store at `path` takes on disk: its database file and write-ahead log.
    static func diskUsage(of path: String) throws(SessionStoreError) -> Int {
        var total = 0
        for file in [path, path + "-wal"] {
            var status = stat()
            if stat(file, &status) == 0 {
                total += Int(status.st_size)
            } else if errno != ENOENT {
                throw SessionStoreError(.unavailable, "cannot read the size of \(file): \(String(cString: strerror(errno)))")
            }
        }
        return total
    }

    /// How many rows `table` holds (of session `id`, when given): for tests of the store's layout.
    func rowCount(of table: String, id: String? = nil) throws(SessionStoreError) -> Int {
        try reading { connection throws(SessionStoreError) -> Int in
            let statement = try connection.statement("SELECT count(*) FROM \(table)" + (id == nil ? "" : " WHERE id = ?"))
            if let id { statement.bind(1, id) }
            defer { statement.reset() }
            _ = try statement.next()
            return Int(statement.int64(0))
        }
    }

    /// The schema the file says it has.
    func schema() throws(SessionStoreError) -> Int {
        try reading { connection throws(SessionStoreError) -> Int in
            let statement = try connection.statement("SELECT value FROM meta WHERE key = 'schema'")
            defer { statement.reset() }
            _ = try statement.next()
            return Int(statement.text(0)) ?? 0
        }
    }

    /// Runs `body` on a free reader connection.
    private func reading<Result>(_ body: (SQLiteConnection) throws(SessionStoreError) -> Result) throws(SessionStoreError) -> Result {
        let path = self.path
        return try readers.borrow(make: { () throws(SessionStoreError) in try SQLiteConnection(path: path, create: false) }, body)
    }

    public func close() {
        checkpointer.stop()
        writer.withLock { connection in
            // Folds the write-ahead log into the database, so a backup of the file alone is whole.
            try? connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        lock.release()
    }
}
