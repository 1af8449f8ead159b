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
/// Opening refuses, and leaves untouched, a file that is not a SQLite database, a database that
/// is not a session store, or one written by a newer schema.
public final class SQLiteSessionStore: SessionStore {
    /// The schema this code writes; a store with a higher one is refused.
    static let schemaVersion = 1
    /// What the `meta` table says a session store is, so another application's database is refused.
    static let application = "reactor-server sessions"

    /// The database file.
    public let path: String
    private let writer: Locked<SQLiteConnection>
    private let reader: Locked<SQLiteConnection>
    private let historyCapacity: Int

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
            COMMIT;
            """)
        let reader = try SQLiteConnection(path: path, create: false)
        self.writer = Locked(writer)
        self.reader = Locked(reader)
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
        try using(writer) { connection throws(SessionStoreError) -> Set<String> in
            try connection.execute("BEGIN IMMEDIATE")
            do throws(SessionStoreError) {
                let stale = try apply(writes, on: connection)
                try connection.execute("COMMIT")
                return stale
            } catch {
                try? connection.execute("ROLLBACK")
                throw error
            }
        }
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
                try insertChunk(id: id, HistoryChunk(entries: entries), on: connection)
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
        try using(reader) { connection throws(SessionStoreError) -> StoredSession? in
            // One read transaction, so the three reads see one commit.
            try connection.execute("BEGIN")
            defer { try? connection.execute("COMMIT") }
            let session = try connection.statement("""
                SELECT type, version, state, started_through, last_activity FROM sessions WHERE id = ?
                """)
            session.bind(1, id)
            defer { session.reset() }
            guard try session.next() else { return nil }
            var stored = StoredSession(type: session.text(0), version: session.uint64(1), state: session.blob(2),
                                       startedThrough: session.uint64(3), lastActivity: session.int64(4),
                                       history: [], pendingActions: [])
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
            let actions = try connection.statement("SELECT seq, action FROM actions WHERE id = ? ORDER BY seq")
            actions.bind(1, id)
            var pending: [(seq: UInt64, action: [UInt8])] = []
            while try actions.next() { pending.append((actions.uint64(0), actions.blob(1))) }
            stored.restore(versions: entries, capacity: historyCapacity, pendingActions: pending)
            return stored
        }
    }

    public func contains(id: String) throws(SessionStoreError) -> Bool {
        try using(reader) { connection throws(SessionStoreError) -> Bool in try contains(id: id, on: connection) }
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
            let statement = try connection.statement("SELECT count(*) FROM sessions")
            defer { statement.reset() }
            _ = try statement.next()
            return Int(statement.int64(0))
        }
    }

    public func close() {
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
