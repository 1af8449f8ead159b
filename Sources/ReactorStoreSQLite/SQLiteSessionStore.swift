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
/// A commit appends each session's new versions to a journal table, a ring of slots written in
/// turn, rather than inserting them among that session's history: a commit then rewrites a page
/// or two for the history, whichever sessions it touched, instead of two or three pages for each.
/// A session's journal rows are folded into its history all at once when the oldest of them falls
/// out of the journal's window (``HistoryJournal``).
///
/// Opening refuses, and leaves untouched, a file that is not a SQLite database, a database that
/// is not a session store, or one written by a newer schema; and a store another process has
/// open (``StoreFileLock``).
public final class SQLiteSessionStore: SessionStore, SessionExporting {
    /// The database file.
    public let path: String
    let writer: Locked<SQLiteConnection>
    /// Loads and look-ups, several at once (activations are served side by side), each
    /// connection opened on first use.
    let readers = LendingPool<SQLiteConnection>(size: SQLiteSessionStore.readerConnections)
    /// Connections reading sessions at once, at most.
    static let readerConnections = 4
    let historyCapacity: Int
    /// The journal's rows not yet folded into the history table. The writer changes it; a load
    /// reads a session's rows from it before its read transaction begins.
    let journal: Locked<HistoryJournal>
    /// How many journal rows are kept before the oldest are folded (at most half its slots).
    let journalWindow: Int
    /// Copies the write-ahead log into the database beside the commits.
    let checkpointer: WALCheckpointer
    /// Keeps other servers off the file while this store is open.
    let lock: StoreFileLock

    /// Opens the store at `path`, creating it (and its directory) when missing.
    /// - Parameters:
    ///   - historyCapacity: versions kept per session for replay (at least the latest).
    ///   - maxPageCount: a cap on the file's size in pages (SQLite's `max_page_count`); a commit
    ///     past it fails as a full disk would.
    ///   - journalWindow: how many rows of new versions the journal keeps before it folds the
    ///     oldest into the sessions' history. A new store's journal has room for twice as many;
    ///     a store opened again keeps its room, and a window over half of it is cut to half.
    /// - Throws: ``SessionStoreError`` naming the path and what is wrong with it.
    public init(path: String, historyCapacity: Int, maxPageCount: Int? = nil, journalWindow: Int = 16384) throws(SessionStoreError) {
        self.path = path
        self.historyCapacity = max(1, historyCapacity)
        try Self.checkFile(at: path)
        lock = try StoreFileLock(storePath: path, creating: true)
        let writer = try SQLiteConnection(path: path, create: true)
        try SQLiteSchema.check(writer)
        try writer.execute("PRAGMA journal_mode=WAL")
        try writer.execute("PRAGMA synchronous=FULL")
        // Checkpoints run beside the commits (``WALCheckpointer``), not inside one.
        try writer.execute("PRAGMA wal_autocheckpoint=0")
        if let maxPageCount { try writer.execute("PRAGMA max_page_count=\(maxPageCount)") }
        let slots = try SQLiteSchema.prepare(writer, journalWindow: max(1, journalWindow))
        // Rows appended while its oldest wait in the window must fall in slots of folded rows.
        self.journalWindow = min(max(1, journalWindow), Int(max(1, slots / 2)))
        journal = Locked(try Self.readJournal(writer, slots: slots))
        checkpointer = try WALCheckpointer(path: path)
        self.writer = Locked(writer)
        // One reader now: a file that a second connection cannot open fails here, at start.
        try reading { (_: SQLiteConnection) throws(SessionStoreError) in }
    }

    deinit {
        checkpointer.stop()
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
                try FileManager.default.createDirectory(
                    at: directory, withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])
            } catch {
                throw SessionStoreError(
                    .unavailable, "cannot create the directory of the session store \(path): \(error.localizedDescription)")
            }
        }
    }

    /// Refuses an existing file that does not start as a SQLite database, before SQLite opens
    /// it (and before anything could be written to it).
    private static func checkFile(at path: String) throws(SessionStoreError) {
        try refuseDirectory(path)
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
            throw SessionStoreError(
                .corrupt, "\(path) is not a SQLite database (its first bytes are not SQLite's header); it was left untouched")
        }
    }

    /// Throws when `path` is a directory: a store is a file (SQLite would say only "disk I/O error").
    static func refuseDirectory(_ path: String) throws(SessionStoreError) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw SessionStoreError(.unavailable, "\(path) is a directory; a session store is a file (such as \(path)/sessions.sqlite)")
        }
    }

    /// Throws unless `path` holds a session store: a file SQLite reads, with a store's tables.
    /// For a command that reads a store and must not make one (opening a store makes it).
    package static func requireStore(at path: String) throws(SessionStoreError) {
        _ = try StoreFileCopy.openStore(path, readOnly: true)
    }

    /// Whether users other than the file's owner may read the store (its group or others have
    /// any permission on it): its ids are the sessions' credentials.
    public var isReadableByOthers: Bool {
        var status = stat()
        return stat(path, &status) == 0 && status.st_mode & 0o077 != 0
    }

    /// Runs `body` on a free reader connection.
    func reading<Result>(_ body: (SQLiteConnection) throws(SessionStoreError) -> Result) throws(SessionStoreError) -> Result {
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
