import ReactorHosting

/// Gives a session store's free pages back to the file system, while no server serves it: SQLite
/// reuses the pages of deleted and expired sessions, but its file never shrinks by itself.
///
/// The store's lock is taken first, so a running server makes it refuse. SQLite's `VACUUM`
/// rewrites the database in one transaction: cut off, or out of space (it needs about the
/// store's size free), it leaves the store as it was.
public enum SQLiteCompaction {
    /// What a compaction did.
    public struct Summary: Sendable, Equatable {
        /// Bytes the store took on disk before, and after (its file and write-ahead log).
        public var bytesBefore: Int
        public var bytesAfter: Int
        /// Sessions in the store, the same before and after.
        public var sessions: Int
    }

    /// Compacts the store at `path`.
    /// - Throws: ``SessionStoreError`` naming the file and what is wrong; nothing changed then.
    public static func compact(_ path: String) throws(SessionStoreError) -> Summary {
        guard StoreFileCopy.exists(path) else {
            throw SessionStoreError(.unavailable, "there is no session store at \(path)")
        }
        let lock = try StoreFileLock(storePath: path)
        defer { lock.release() }
        let before = try SQLiteSessionStore.diskUsage(of: path)
        let sessions = try vacuum(path)
        return Summary(bytesBefore: before, bytesAfter: try SQLiteSessionStore.diskUsage(of: path), sessions: sessions)
    }

    /// Rewrites the store at `path` without its free pages, on a connection closed before it
    /// returns; returns how many sessions it holds.
    private static func vacuum(_ path: String) throws(SessionStoreError) -> Int {
        let store = try StoreFileCopy.openStore(path)
        try store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        try store.execute("VACUUM")
        // The rewritten pages went through the write-ahead log: into the file, and the log emptied.
        try store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return try SQLiteSessionStore.countSessions(on: store)
    }
}
