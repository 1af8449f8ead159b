import CSQLite
import Foundation
import Locking
import ReactorHosting

// Commits: each batch of writes in one transaction, the history journal folded as it fills, idle sessions deleted.

extension SQLiteSessionStore {
    public func commit(_ writes: [SessionWrite]) throws(SessionStoreError) -> Set<String> {
        try writer.withLock { connection throws(SessionStoreError) -> Set<String> in
            try connection.execute("BEGIN IMMEDIATE")
            do throws(SessionStoreError) {
                var settled: [(id: String, through: Int64)] = []
                var foldedThrough: Int64 = 0
                let lastRow = journal.withLock { $0.lastRow }
                let stale = try apply(writes, on: connection, settling: &settled, foldedThrough: &foldedThrough)
                let appended = Int(journal.withLock { $0.lastRow } - lastRow)
                if let through = try foldOldestJournalRows(appended: appended, on: connection, settling: &settled) {
                    foldedThrough = max(foldedThrough, through)
                }
                try connection.execute("COMMIT")
                var frames: Int32 = 0
                var highest: Int32 = 0
                sqlite3_db_status(connection.handle, SQLITE_DBSTATUS_CACHE_WRITE, &frames, &highest, 1)
                if checkpointer.committed(frames: Int(frames)) { checkpointer.finish(on: connection) }
                // Only now: a load that read the journal before this commit must still find the
                // folded rows there, and one that reads it after finds them in the history.
                journal.withLock { journal in
                    for (id, through) in settled { journal.forget(id, through: through) }
                    journal.folded(through: foldedThrough)
                }
                return stale
            } catch {
                try? connection.execute("ROLLBACK")
                // The rows numbered for the batch were not written.
                if let rows = try? Self.readJournal(connection, slots: journal.withLock({ $0.slots })) {
                    journal.withLock { $0 = rows }
                }
                throw error
            }
        }
    }

    /// The journal's unfolded rows, as the table of `slots` slots holds them: those newer than
    /// their session's row, which a fold brings up to the rows it folds. A session folded before
    /// a crash, or deleted, has none.
    static func readJournal(_ connection: SQLiteConnection, slots: Int64) throws(SessionStoreError) -> HistoryJournal {
        let statement = try connection.statement(
            """
            SELECT j.row, j.id, j.last_version, j.last_activity, length(j.versions) FROM journal j JOIN sessions s ON s.id = j.id
            WHERE j.last_version > s.version ORDER BY j.row
            """)
        defer { statement.reset() }
        var rows: [(row: Int64, id: String, version: UInt64, lastActivity: Int64, bytes: Int)] = []
        while try statement.next() {
            rows.append((statement.int64(0), statement.text(1), statement.uint64(2), statement.int64(3), Int(statement.int64(4))))
        }
        let last = try connection.statement("SELECT coalesce(max(row), 0) FROM journal")
        defer { last.reset() }
        _ = try last.next()
        return HistoryJournal(slots: slots, rows: rows, lastRow: last.int64(0))
    }

    /// The writes of one batch, inside its transaction, in order (planned by ``SessionBatch``).
    /// A session's versions in the batch become one journal row (a chunk); the sessions it
    /// deletes, or folds to free a slot, are added to `settled`, whose journal entries go once the
    /// batch is committed, and `foldedThrough` is raised to the rows those folds freed.
    private func apply(
        _ writes: [SessionWrite], on connection: SQLiteConnection,
        settling settled: inout [(id: String, through: Int64)], foldedThrough: inout Int64
    ) throws(SessionStoreError) -> Set<String> {
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
                let session = try connection.statement(
                    """
                    INSERT INTO sessions(id, type, version, state, started_through, last_activity, published_ahead, creation,
                                         subject)
                    VALUES (?, ?, 0, ?, 0, ?, ?, ?, ?)
                    """)
                session.bind(1, id)
                session.bind(2, type)
                session.bind(3, blob: state)
                session.bind(4, lastActivity)
                session.bind(5, Int64(publishingAhead ? 1 : 0))
                session.bind(6, optionalBlob: creation)
                session.bind(7, optionalText: creation.flatMap(SessionWrite.owner(ofCreation:)))
                try session.run()
                exists[id] = true
                try insertChunk(
                    id: id, HistoryChunk(entries: [SessionBatch.Version(version: 0, producedBy: 0, state: state)]), on: connection)
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
            case .attempt(let id, let seq):
                let statement = try connection.statement("UPDATE actions SET attempts = attempts + 1 WHERE id = ? AND seq = ?")
                statement.bind(1, id)
                statement.bind(2, seq)
                try statement.run()
            case .version(let id, let version, _, let startedThrough, _, let lastActivity):
                // Written once, at the session's last version in the batch: one journal row, which
                // carries the session's newest version until it is folded (its `sessions` row is
                // then brought up to it), so a commit appends a page or two instead of rewriting
                // a page of the sessions table for each session it touched.
                guard let entries = batch.versions(of: id, endingAt: version) else { continue }
                if exists[id] == false { continue }
                guard let stored = try storedVersion(of: id, on: connection) else {
                    exists[id] = false
                    continue
                }
                if stored >= entries[0].version {
                    stale.insert(id)
                    continue
                }
                exists[id] = true
                try foldRowInTheWay(on: connection, settling: &settled, foldedThrough: &foldedThrough)
                let chunk = HistoryChunk(entries: entries).encoded()
                let row = journal.withLock { $0.append(id: id, version: version, lastActivity: lastActivity, bytes: chunk.count) }
                let append = try connection.statement(
                    """
                    INSERT OR REPLACE INTO journal(slot, row, id, first_version, last_version, versions, started_through,
                                                   last_activity)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """)
                append.bind(1, journal.withLock { $0.slot(of: row) })
                append.bind(2, row)
                append.bind(3, id)
                append.bind(4, entries[0].version)
                append.bind(5, version)
                append.bind(6, blob: chunk)
                append.bind(7, startedThrough)
                append.bind(8, lastActivity)
                try append.run()
            case .touch(let id, let lastActivity):
                let statement = try connection.statement("UPDATE sessions SET last_activity = max(last_activity, ?) WHERE id = ?")
                statement.bind(1, lastActivity)
                statement.bind(2, id)
                try statement.run()
            case .delete(let id):
                try delete(id: id, on: connection)
                settled.append((id, .max))
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

    /// The session's newest stored version: its unfolded journal rows', else its row's; nil when
    /// there is no such session.
    private func storedVersion(of id: String, on connection: SQLiteConnection) throws(SessionStoreError) -> UInt64? {
        if let journaled = journal.withLock({ $0.newest[id]?.version }) { return journaled }
        let statement = try connection.statement("SELECT version FROM sessions WHERE id = ?")
        defer { statement.reset() }
        statement.bind(1, id)
        return try statement.next() ? statement.uint64(0) : nil
    }

    private func insertChunk(id: String, _ chunk: HistoryChunk, on connection: SQLiteConnection) throws(SessionStoreError) {
        try insertChunk(
            id: id, firstVersion: chunk.entries[0].version, lastVersion: chunk.entries[chunk.entries.count - 1].version,
            versions: chunk.encoded(), on: connection)
    }

    private func insertChunk(
        id: String, firstVersion: UInt64, lastVersion: UInt64, versions: [UInt8],
        on connection: SQLiteConnection
    ) throws(SessionStoreError) {
        let statement = try connection.statement(
            """
            INSERT OR REPLACE INTO history(id, first_version, last_version, versions) VALUES (?, ?, ?, ?)
            """)
        statement.bind(1, id)
        statement.bind(2, firstVersion)
        statement.bind(3, lastVersion)
        statement.bind(4, blob: versions)
        try statement.run()
    }

    /// Folds the sessions whose unfolded rows hold the slot the next row takes, if any: in a
    /// batch of more sessions than the ring has free slots, or a window the folds have not kept
    /// up with. A session folded so in this batch (its rows through the slot) is not folded again.
    private func foldRowInTheWay(
        on connection: SQLiteConnection,
        settling settled: inout [(id: String, through: Int64)], foldedThrough: inout Int64
    ) throws(SessionStoreError) {
        guard let through = journal.withLock({ $0.mustFold(beforeAppending: 1, alsoFolded: foldedThrough) }) else { return }
        let due = journal.withLock { journal in
            journal.sessions(withRowsThrough: through).filter { id in
                // Folded in this batch already, through rows the fold took.
                !settled.contains { $0.id == id && (journal.rows[id]?.last ?? 0) <= $0.through }
            }
        }
        for id in due { settled.append((id, try fold(id, on: connection) ?? .max)) }
        foldedThrough = through
    }

    /// Folds the sessions whose oldest journal row fell out of the window into their history,
    /// oldest first, until it has folded twice the rows the commit appended (at least one
    /// session): the journal keeps near its window, and sessions whose rows fall out together do
    /// not make one commit long.
    /// - Returns: the row through which every row is then folded, if that moved.
    private func foldOldestJournalRows(
        appended: Int, on connection: SQLiteConnection,
        settling settled: inout [(id: String, through: Int64)]
    ) throws(SessionStoreError) -> Int64? {
        let (cutoff, due) = journal.withLock { journal -> (Int64, [(id: String, rows: Int)]) in
            var cutoff = journal.lastRow - Int64(journalWindow)
            // Large rows past their budget: the oldest sessions are due however young their rows.
            if journal.largeBytes > journalWindow * HistoryJournal.largeRowBytes, let oldest = journal.oldestUnfoldedRow() {
                cutoff = max(cutoff, oldest)
            }
            guard cutoff > journal.foldedThrough else { return (0, []) }
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
            settled.append((session.id, try fold(session.id, on: connection) ?? .max))
            folded += session.rows
        }
        return through > journal.withLock({ $0.foldedThrough }) ? through : nil
    }

    /// Copies the session's unfolded journal rows into its history as one chunk (their chunks
    /// end to end: one row, written to a page or two, however many commits they came from),
    /// leaving out the rows wholly older than the versions the history keeps, brings its
    /// `sessions` row up to the newest of them, and drops the history's chunks older than it
    /// keeps. The rows stay in their slots, folded: the `sessions` row now as new as them says so
    /// to a reopened store, which folds again, to the same keys, the rows of a fold a crash undid.
    /// Large rows (``HistoryJournal/largeRowBytes``) are deleted instead: the ring keeps no
    /// folded state of a few kilobytes in each of its slots.
    /// - Returns: the last row folded; nil for a deleted session, whose rows (if any are left)
    ///   are written over in time.
    private func fold(_ id: String, on connection: SQLiteConnection) throws(SessionStoreError) -> Int64? {
        guard try contains(id: id, on: connection) else { return nil }
        let (rows, slots) = journal.withLock { ($0.rows[id] ?? [], $0.slots) }
        let read = try connection.statement(
            "SELECT first_version, last_version, versions, started_through, last_activity FROM journal WHERE slot = ? AND row = ?")
        var first: UInt64?
        var latest: UInt64 = 0
        /// The rows' chunks, newest first.
        var chunks: [[UInt8]] = []
        /// The newest row's chunk and what it carries for the `sessions` row.
        var newest: (chunk: [UInt8], startedThrough: UInt64, lastActivity: Int64)?
        // Newest first, until they hold the versions the history keeps.
        for row in rows.reversed() {
            read.reset()
            read.bind(1, row % slots)
            read.bind(2, row)
            guard try read.next() else { continue }
            let chunk = read.blob(2)
            if newest == nil {
                latest = read.uint64(1)
                newest = (chunk, read.uint64(3), read.int64(4))
            }
            let rowFirst = read.uint64(0)
            first = rowFirst
            chunks.append(chunk)
            if latest - rowFirst + 1 >= UInt64(historyCapacity) { break }
        }
        read.reset()
        guard let first, let newest, let lastRow = rows.last else { return rows.last }
        try deleteJournalRows(journal.withLock { journal in rows.filter { journal.largeRows[$0] != nil } }, on: connection)
        let versions = Array(chunks.reversed().joined())
        try insertChunk(id: id, firstVersion: first, lastVersion: latest, versions: versions, on: connection)
        guard let state = HistoryChunk(decoding: newest.chunk)?.entries.last?.state else {
            throw SessionStoreError(.corrupt, "\(path): the stored history of a session is damaged")
        }
        let session = try connection.statement(
            """
            UPDATE sessions SET version = ?1, state = ?2, started_through = ?3, last_activity = max(last_activity, ?4)
            WHERE id = ?5 AND version < ?1
            """)
        session.bind(1, latest)
        session.bind(2, blob: state)
        session.bind(3, newest.startedThrough)
        session.bind(4, newest.lastActivity)
        session.bind(5, id)
        try session.run()
        if latest >= UInt64(historyCapacity) {
            let trim = try connection.statement("DELETE FROM history WHERE id = ? AND last_version <= ?")
            trim.bind(1, id)
            trim.bind(2, latest - UInt64(historyCapacity))
            try trim.run()
        }
        return lastRow
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
        try deleteJournalRows(journal.withLock { $0.rows[id] ?? [] }, on: connection)
    }

    /// Deletes these rows of the journal from their slots.
    private func deleteJournalRows(_ rows: [Int64], on connection: SQLiteConnection) throws(SessionStoreError) {
        guard !rows.isEmpty else { return }
        let slots = journal.withLock { $0.slots }
        let delete = try connection.statement("DELETE FROM journal WHERE slot = ? AND row = ?")
        for row in rows {
            delete.reset()
            delete.bind(1, row % slots)
            delete.bind(2, row)
            try delete.run()
        }
    }

    public func withdrawAttempts(_ attempts: [String: [UInt64]]) throws(SessionStoreError) {
        if attempts.isEmpty { return }
        try writer.withLock { connection throws(SessionStoreError) in
            try connection.immediateTransaction { () throws(SessionStoreError) in
                // In place: an integer's new value takes no new page, so this commits on a full disk too.
                let withdraw = try connection.statement(
                    "UPDATE actions SET attempts = attempts - 1 WHERE id = ? AND seq = ? AND attempts > 0")
                for (id, seqs) in attempts {
                    for seq in seqs {
                        withdraw.reset()
                        withdraw.bind(1, id)
                        withdraw.bind(2, seq)
                        try withdraw.run()
                    }
                }
            }
        }
    }

    public func deleteIdle(before cutoff: Int64, excluding: Set<String>) throws(SessionStoreError) -> [String] {
        // Found by a scan on the reading connection, which never holds up a commit: no index on
        // last activity, which every version would otherwise rewrite.
        let ids = try reading { connection throws(SessionStoreError) -> [String] in
            let idle = try connection.statement("SELECT id FROM sessions WHERE last_activity < ?")
            idle.bind(1, cutoff)
            var ids: [String] = []
            let journal = self.journal.withLock { $0 }
            while try idle.next() {
                let id = idle.text(0)
                // Its row's activity may lag its unfolded journal rows'.
                if !excluding.contains(id) && !journal.isActive(id, since: cutoff) { ids.append(id) }
            }
            return ids
        }
        if ids.isEmpty { return [] }
        return try writer.withLock { connection throws(SessionStoreError) -> [String] in
            var deleted: [String] = []
            try connection.immediateTransaction { () throws(SessionStoreError) in
                // Still idle: a session touched since the scan keeps its newer activity.
                let stillIdle = try connection.statement("SELECT 1 FROM sessions WHERE id = ? AND last_activity < ?")
                for id in ids {
                    stillIdle.reset()
                    stillIdle.bind(1, id)
                    stillIdle.bind(2, cutoff)
                    let idle = try stillIdle.next()
                    stillIdle.reset()
                    if idle, !journal.withLock({ $0.isActive(id, since: cutoff) }) {
                        try delete(id: id, on: connection)
                        deleted.append(id)
                    }
                }
            }
            journal.withLock { journal in for id in deleted { journal.forget(id) } }
            return deleted
        }
    }
}
