import CSQLite
import Foundation
import Locking
import ReactorHosting

// Loads, look-ups, counts and exports, on the reader connections.

extension SQLiteSessionStore {
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
            let session = try connection.statement(
                """
                SELECT type, version, state, started_through, last_activity, published_ahead, shown_through, creation
                FROM sessions WHERE id = ?
                """)
            session.bind(1, id)
            defer { session.reset() }
            guard try session.next() else { return nil }
            var stored = StoredSession(
                type: session.text(0), version: session.uint64(1), state: session.blob(2),
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
            // The newest journal row also carries the session as it stands when it is newer than
            // its row, which is brought up to date only when the rows are folded.
            let journalSlots = journal.withLock { $0.slots }
            let journaled = try connection.statement(
                "SELECT versions, started_through, last_activity FROM journal WHERE slot = ? AND row = ? AND id = ?")
            var newest: [[SessionBatch.Version]] = []
            var journaledVersions = 0
            for row in journalRows.reversed() where journaledVersions < historyCapacity {
                journaled.reset()
                journaled.bind(1, row % journalSlots)
                journaled.bind(2, row)
                journaled.bind(3, id)
                guard try journaled.next() else { continue }
                guard let chunk = HistoryChunk(decoding: journaled.blob(0)), let last = chunk.entries.last else {
                    journaled.reset()
                    throw SessionStoreError(.corrupt, "\(path): the stored history of a session is damaged")
                }
                if newest.isEmpty, !journaled.isNull(1), last.version > stored.version {
                    stored.version = last.version
                    stored.state = last.state
                    stored.startedThrough = journaled.uint64(1)
                    stored.lastActivity = max(stored.lastActivity, journaled.int64(2))
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
            let actions = try connection.statement("SELECT seq, action, attempts FROM actions WHERE id = ? ORDER BY seq")
            actions.bind(1, id)
            var pending: [(seq: UInt64, action: [UInt8], attempts: Int)] = []
            while try actions.next() { pending.append((actions.uint64(0), actions.blob(1), Int(actions.int64(2)))) }
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

    func contains(id: String, on connection: SQLiteConnection) throws(SessionStoreError) -> Bool {
        let statement = try connection.statement("SELECT 1 FROM sessions WHERE id = ?")
        statement.bind(1, id)
        defer { statement.reset() }
        return try statement.next()
    }

    /// How many sessions are stored.
    public func count() throws(SessionStoreError) -> Int {
        try reading { connection throws(SessionStoreError) -> Int in try Self.countSessions(on: connection) }
    }

    /// How many stored sessions `owner` created, read from the index of sessions by subject.
    public func count(owner: String) throws(SessionStoreError) -> Int {
        try reading { connection throws(SessionStoreError) -> Int in
            let statement = try connection.statement("SELECT count(*) FROM sessions WHERE subject = ?")
            defer { statement.reset() }
            statement.bind(1, owner)
            _ = try statement.next()
            return Int(statement.int64(0))
        }
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
}
