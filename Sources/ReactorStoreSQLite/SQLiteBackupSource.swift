import ReactorHosting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The sessions of a backup file, read to restore them into another store (a PostgreSQL
/// database) without changing the file: it is checked and copied beside itself
/// (`FILE.reading-PID`), and the sessions are read from the copy, which ``close()`` removes.
public final class SQLiteBackupSource: SessionExporting {
    /// The backup.
    public let path: String
    private let copyPath: String
    private let store: SQLiteSessionStore

    /// Checks the backup at `path` and opens a copy of it.
    /// - Parameter historyCapacity: versions of each session's history read (at least the latest).
    /// - Throws: ``SessionStoreError`` naming the file when it is missing or not a session store.
    public init(path: String, historyCapacity: Int) throws(SessionStoreError) {
        self.path = path
        copyPath = "\(path).reading-\(getpid())"
        // Not read-only: a read-only connection leaves the write-ahead log files it makes beside the
        // backup; this one only reads, and removes them when it closes.
        let backup = try StoreFileCopy.openStore(path)
        _ = try StoreFileCopy.write(backup, to: copyPath)
        do throws(SessionStoreError) {
            store = try SQLiteSessionStore(path: copyPath, historyCapacity: historyCapacity)
        } catch {
            StoreFileCopy.removeStore(at: copyPath)
            throw error
        }
    }

    public func storedIDs(after id: String?, limit: Int) throws(SessionStoreError) -> [String] {
        try store.storedIDs(after: id, limit: limit)
    }

    public func export(ids: [String]) throws(SessionStoreError) -> [CopiedSession] {
        try store.export(ids: ids)
    }

    /// Nobody serves a backup.
    public func servedSessions() throws(SessionStoreError) -> Int { 0 }

    /// Closes and removes the copy.
    public func close() {
        store.close()
        StoreFileCopy.removeStore(at: copyPath)
    }
}
