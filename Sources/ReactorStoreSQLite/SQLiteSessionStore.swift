import CSQLite
import Foundation
import Locking
import ReactorHosting

/// The embedded session store: one SQLite file in WAL mode, every commit synced to disk
/// (`synchronous=FULL`), through SQLite's C API.
///
/// A commit appends its batch to a journal, as one row: a few pages written and synced,
/// whichever sessions it touches. A thread of the store's own folds the journal into the
/// sessions, history and actions tables a few times a second, many commits at once, without a
/// sync of its own (the next commit's sync covers it; a fold lost with a crash is done again from
/// the journal). So a busy session's row is rewritten once per fold rather than once per commit,
/// and an action accepted and settled between two folds is never written to the tables at all.
/// A read of a session whose writes are still in the journal folds it first; opening the store
/// folds whatever a crash left there.
///
/// Two connections: one writes (the commit thread, the fold and expiry), one reads
/// (activations), so that a read never waits for a commit's sync to disk.
///
/// Opening refuses, and leaves untouched, a file that is not a SQLite database, a database that
/// is not a session store, or one written by a newer schema.
public final class SQLiteSessionStore: SessionStore {
    /// The schema this code writes; a store with a higher one is refused. 2 added the journal,
    /// which an older reader would not fold.
    static let schemaVersion = 2
    /// What the `meta` table says a session store is, so another application's database is refused.
    static let application = "reactor-server sessions"

    /// The database file.
    public let path: String
    private let writer: Locked<SQLiteConnection>
    private let reader: Locked<SQLiteConnection>
    private let historyCapacity: Int
    /// The sessions with writes in unfolded journal rows.
    private let journal = Locked(JournalIndex())
    /// Folds the journal in the background (see ``JournalFolder``).
    private let folder = JournalFolder()
    /// Most journal rows one fold takes, so that a commit never waits long behind one.
    static let rowsPerFold = 32

    /// Opens the store at `path`, creating it (and its directory) when missing.
    /// - Parameters:
    ///   - historyCapacity: versions kept per session for replay (at least the latest).
    ///   - maxPageCount: a cap on the file's size in pages (SQLite's `max_page_count`); a commit
    ///     past it fails as a full disk would.
    /// - Throws: ``SessionStoreError`` naming the path and what is wrong with it.
    public init(path: String, historyCapacity: Int, maxPageCount: Int? = nil) throws(SessionStoreError) {
        self.path = path
        self.historyCapacity = max(1, historyCapacity)
        try Self.checkFile(at: path)
        let writer = try SQLiteConnection(path: path, create: true)
        try Self.checkSchema(writer)
        try writer.execute("PRAGMA journal_mode=WAL")
        try writer.execute("PRAGMA synchronous=FULL")
        if let maxPageCount { try writer.execute("PRAGMA max_page_count=\(maxPageCount)") }
        try writer.execute("""
            BEGIN IMMEDIATE;
            CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
            INSERT OR IGNORE INTO meta(key, value) VALUES ('application', '\(Self.application)');
            INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', '\(Self.schemaVersion)');
            CREATE TABLE IF NOT EXISTS sessions(
                id TEXT PRIMARY KEY, type TEXT NOT NULL, version INTEGER NOT NULL, state BLOB NOT NULL,
                started_through INTEGER NOT NULL, last_activity INTEGER NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS history(
                id TEXT NOT NULL, first_version INTEGER NOT NULL, last_version INTEGER NOT NULL,
                versions BLOB NOT NULL,
                PRIMARY KEY(id, first_version)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS actions(
                id TEXT NOT NULL, seq INTEGER NOT NULL, action BLOB NOT NULL,
                PRIMARY KEY(id, seq)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS journal(seq INTEGER PRIMARY KEY, writes BLOB NOT NULL);
            UPDATE meta SET value = '\(Self.schemaVersion)' WHERE key = 'schema';
            COMMIT;
            """)
        let reader = try SQLiteConnection(path: path, create: false)
        self.writer = Locked(writer)
        self.reader = Locked(reader)
        // What a crash left in the journal, before anything reads the tables.
        try foldAll()
        folder.start { [weak self] in
            guard let self else { return false }
            return (try? self.fold()) ?? false
        }
    }

    deinit {
        // The thread may hold the last reference as it ends a fold: do not wait for it.
        folder.stop(wait: false)
    }

    /// Refuses an existing file that does not start as a SQLite database, before SQLite opens
    /// it (and before anything could be written to it).
    private static func checkFile(at path: String) throws(SessionStoreError) {
        let url = URL(fileURLWithPath: path)
        let directory = url.deletingLastPathComponent()
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw SessionStoreError(.unavailable, "cannot create the session store \(path): \(directory.path) is not a directory")
            }
        } else {
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            } catch {
                throw SessionStoreError(.unavailable, "cannot create the directory of the session store \(path): \(error.localizedDescription)")
            }
        }
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

    /// Refuses a database that holds tables but is not a session store, or a newer one.
    private static func checkSchema(_ connection: SQLiteConnection) throws(SessionStoreError) {
        let tables = try connection.statement("SELECT count(*) FROM sqlite_master WHERE type = 'table'")
        defer { tables.reset() }
        guard try tables.next() else { return }
        if tables.int64(0) == 0 { return }
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
        let stale = try using(writer) { connection throws(SessionStoreError) -> Set<String> in
            let stale = try staleSessions(in: writes, on: connection)
            let kept = stale.isEmpty ? writes : writes.filter { !stale.contains($0.instanceID) }
            if kept.isEmpty { return stale }
            try connection.execute("BEGIN IMMEDIATE")
            do throws(SessionStoreError) {
                let append = try connection.statement("INSERT INTO journal(writes) VALUES (?) RETURNING seq")
                append.bind(1, blob: JournalRecord(kept).encoded())
                defer { append.reset() }
                guard try append.next() else { throw connection.error(SQLITE_ERROR, doing: "appending to the journal") }
                let row = append.int64(0)
                append.reset()
                try connection.execute("COMMIT")
                journal.withLock { $0.add(row: row, writes: kept) }
                return stale
            } catch {
                try? connection.execute("ROLLBACK")
                throw error
            }
        }
        folder.wake()
        return stale
    }

    /// The sessions whose first version in `writes` is not newer than the one stored (or
    /// journaled): a writer that fell behind. Their writes are refused.
    private func staleSessions(in writes: [SessionWrite], on connection: SQLiteConnection) throws(SessionStoreError) -> Set<String> {
        var stale: Set<String> = []
        var checked: Set<String> = []
        for case .version(let id, let version, _, _, _, _) in writes where checked.insert(id).inserted {
            let (exists, journaled) = journal.withLock { ($0.exists(id), $0.newestVersion(of: id)) }
            // Writes of a deleted session are not refused: a fold ignores them, as it did before.
            if exists == false { continue }
            let newest: UInt64?
            if let journaled {
                newest = journaled
            } else {
                let stored = try connection.statement("SELECT version FROM sessions WHERE id = ?")
                stored.bind(1, id)
                defer { stored.reset() }
                newest = try stored.next() ? stored.uint64(0) : nil
            }
            if let newest, newest >= version { stale.insert(id) }
        }
        return stale
    }

    // MARK: - Folding the journal

    /// Folds up to ``rowsPerFold`` journal rows into the tables, in one transaction that is not
    /// synced by itself. Returns whether rows are left.
    @discardableResult
    func fold() throws(SessionStoreError) -> Bool {
        try using(writer) { connection throws(SessionStoreError) -> Bool in
            let rows = try connection.statement("SELECT seq, writes FROM journal ORDER BY seq LIMIT ?")
            rows.bind(1, Int64(Self.rowsPerFold + 1))
            var writes: [SessionWrite] = []
            var last: Int64?
            var count = 0
            while try rows.next() {
                count += 1
                if count > Self.rowsPerFold { break }
                guard let record = JournalRecord(decoding: rows.blob(1)) else {
                    rows.reset()
                    throw SessionStoreError(.corrupt, "\(path): a journal entry is damaged; the store was left untouched")
                }
                writes += record.writes
                last = rows.int64(0)
            }
            rows.reset()
            guard let last else { return false }
            // Not synced: the next commit's sync covers it, and until then the journal holds it.
            try connection.execute("PRAGMA synchronous=NORMAL")
            defer { try? connection.execute("PRAGMA synchronous=FULL") }
            try connection.execute("BEGIN IMMEDIATE")
            do throws(SessionStoreError) {
                // The rows go first, so that a nearly full store reuses their pages.
                let drop = try connection.statement("DELETE FROM journal WHERE seq <= ?")
                drop.bind(1, last)
                try drop.run()
                _ = try apply(writes, on: connection)
                try connection.execute("COMMIT")
            } catch {
                try? connection.execute("ROLLBACK")
                throw error
            }
            journal.withLock { $0.folded(through: last) }
            return count > Self.rowsPerFold
        }
    }

    /// Folds the whole journal.
    private func foldAll() throws(SessionStoreError) {
        while try fold() {}
    }

    /// The writes of one batch, inside its transaction, in order (planned by ``SessionBatch``).
    /// A session's versions in the batch become one history row (a chunk) and one update of its
    /// row.
    private func apply(_ writes: [SessionWrite], on connection: SQLiteConnection) throws(SessionStoreError) -> Set<String> {
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
            case .create(let id, let type, let state, let lastActivity):
                let session = try connection.statement("""
                    INSERT INTO sessions(id, type, version, state, started_through, last_activity) VALUES (?, ?, 0, ?, 0, ?)
                    """)
                session.bind(1, id)
                session.bind(2, type)
                session.bind(3, blob: state)
                session.bind(4, lastActivity)
                try session.run()
                exists[id] = true
                try insertChunk(id: id, HistoryChunk(entries: [SessionBatch.Version(version: 0, producedBy: 0, state: state)]), on: connection)
            case .accept(let id, let seq, let action):
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
                // A fold may carry more of a busy session's versions than its history keeps.
                try insertChunk(id: id, HistoryChunk(entries: Array(entries.suffix(historyCapacity))), on: connection)
                try trimHistory(id: id, firstVersion: entries[0].version, lastVersion: version, on: connection)
            case .touch(let id, let lastActivity):
                let statement = try connection.statement("UPDATE sessions SET last_activity = max(last_activity, ?) WHERE id = ?")
                statement.bind(1, lastActivity)
                statement.bind(2, id)
                try statement.run()
            case .delete(let id):
                try delete(id: id, on: connection)
                exists[id] = false
            case .release:
                // One process owns the file: nothing to hand over.
                break
            }
        }
        return stale
    }

    private func insertChunk(id: String, _ chunk: HistoryChunk, on connection: SQLiteConnection) throws(SessionStoreError) {
        let statement = try connection.statement("""
            INSERT OR REPLACE INTO history(id, first_version, last_version, versions) VALUES (?, ?, ?, ?)
            """)
        statement.bind(1, id)
        statement.bind(2, chunk.entries[0].version)
        statement.bind(3, chunk.entries[chunk.entries.count - 1].version)
        statement.bind(4, blob: chunk.encoded())
        try statement.run()
    }

    /// Drops the chunks that hold only versions older than the history keeps, when it is time to.
    private func trimHistory(id: String, firstVersion: UInt64, lastVersion: UInt64,
                             on connection: SQLiteConnection) throws(SessionStoreError) {
        guard let through = HistoryChunk.trimmedThrough(firstVersion: firstVersion, lastVersion: lastVersion,
                                                        capacity: historyCapacity) else { return }
        let trim = try connection.statement("DELETE FROM history WHERE id = ? AND last_version <= ?")
        trim.bind(1, id)
        trim.bind(2, through)
        try trim.run()
    }

    private func delete(id: String, on connection: SQLiteConnection) throws(SessionStoreError) {
        for table in ["sessions", "history", "actions"] {
            let statement = try connection.statement("DELETE FROM \(table) WHERE id = ?")
            statement.bind(1, id)
            try statement.run()
        }
    }

    public func deleteIdle(before cutoff: Int64, excluding: Set<String>) throws(SessionStoreError) -> [String] {
        try foldAll()
        // Found by a scan on the reading connection, which never holds up a commit: no index on
        // last activity, which every version would otherwise rewrite.
        let ids = try using(reader) { connection throws(SessionStoreError) -> [String] in
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
        return try using(writer) { connection throws(SessionStoreError) -> [String] in
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
            return deleted
        }
    }

    // MARK: - Reading

    public func load(id: String) throws(SessionStoreError) -> StoredSession? {
        let journaled = journal.withLock { $0.isJournaled(id) }
        return try using(reader) { connection throws(SessionStoreError) -> StoredSession? in
            // One read transaction, so every read sees the same commit (and a fold either
            // entirely before it or entirely after).
            try connection.execute("BEGIN")
            defer { try? connection.execute("COMMIT") }
            var image = try tableImage(of: id, on: connection)
            if journaled {
                for write in try journalWrites(on: connection) where write.instanceID == id { image.apply(write) }
            }
            return image.stored(capacity: historyCapacity)
        }
    }

    /// What the tables hold of session `id`.
    private func tableImage(of id: String, on connection: SQLiteConnection) throws(SessionStoreError) -> SessionImage {
        let session = try connection.statement("""
            SELECT type, version, state, started_through, last_activity FROM sessions WHERE id = ?
            """)
        session.bind(1, id)
        defer { session.reset() }
        guard try session.next() else { return SessionImage(row: nil) }
        var image = SessionImage(row: SessionImage.Row(type: session.text(0), version: session.uint64(1), state: session.blob(2),
                                                       startedThrough: session.uint64(3), lastActivity: session.int64(4)))
        let history = try connection.statement("SELECT versions FROM history WHERE id = ? ORDER BY first_version")
        history.bind(1, id)
        while try history.next() {
            guard let chunk = HistoryChunk(decoding: history.blob(0)) else {
                history.reset()
                throw SessionStoreError(.corrupt, "\(path): the stored history of a session is damaged")
            }
            image.versions += chunk.entries
        }
        let actions = try connection.statement("SELECT seq, action FROM actions WHERE id = ? ORDER BY seq")
        actions.bind(1, id)
        while try actions.next() { image.pendingActions[actions.uint64(0)] = actions.blob(1) }
        return image
    }

    /// Every write in the journal, in order.
    private func journalWrites(on connection: SQLiteConnection) throws(SessionStoreError) -> [SessionWrite] {
        let rows = try connection.statement("SELECT writes FROM journal ORDER BY seq")
        defer { rows.reset() }
        var writes: [SessionWrite] = []
        while try rows.next() {
            guard let record = JournalRecord(decoding: rows.blob(0)) else {
                throw SessionStoreError(.corrupt, "\(path): a journal entry is damaged; the store was left untouched")
            }
            writes += record.writes
        }
        return writes
    }

    public func contains(id: String) throws(SessionStoreError) -> Bool {
        if let exists = journal.withLock({ $0.exists(id) }) { return exists }
        return try using(reader) { connection throws(SessionStoreError) -> Bool in try contains(id: id, on: connection) }
    }

    private func contains(id: String, on connection: SQLiteConnection) throws(SessionStoreError) -> Bool {
        let statement = try connection.statement("SELECT 1 FROM sessions WHERE id = ?")
        statement.bind(1, id)
        defer { statement.reset() }
        return try statement.next()
    }

    /// How many sessions are stored.
    public func count() throws(SessionStoreError) -> Int {
        try using(reader) { connection throws(SessionStoreError) -> Int in
            try connection.execute("BEGIN")
            defer { try? connection.execute("COMMIT") }
            let statement = try connection.statement("SELECT count(*) FROM sessions")
            defer { statement.reset() }
            _ = try statement.next()
            var count = Int(statement.int64(0))
            // Sessions the journal creates or deletes that the tables do not know of yet.
            var existence: [String: Bool] = [:]
            for write in try journalWrites(on: connection) {
                switch write {
                case .create(let id, _, _, _): existence[id] = true
                case .delete(let id): existence[id] = false
                default: break
                }
            }
            for (id, exists) in existence where exists != (try contains(id: id, on: connection)) {
                count += exists ? 1 : -1
            }
            return count
        }
    }

    public func close() {
        folder.stop()
        try? foldAll()
        writer.withLock { connection in
            // Folds the write-ahead log into the database, so a backup of the file alone is whole.
            try? connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }
}

/// Runs `body` with the connection behind `lock`, keeping its typed error.
private func using<Result>(_ lock: Locked<SQLiteConnection>,
                           _ body: (SQLiteConnection) throws(SessionStoreError) -> Result) throws(SessionStoreError) -> Result {
    let outcome = lock.withLock { connection -> Swift.Result<Result, SessionStoreError> in
        do throws(SessionStoreError) {
            return .success(try body(connection))
        } catch {
            return .failure(error)
        }
    }
    return try outcome.get()
}
