import CSQLite
import ReactorHosting

/// One SQLite connection with its prepared statements, used by one thread at a time (its owner
/// holds it behind a lock).
final class SQLiteConnection {
    let handle: OpaquePointer
    let path: String
    private var statements: [String: OpaquePointer] = [:]

    /// Opens `path` (creating the file when `create`); nothing is written yet. A `readOnly`
    /// connection never writes the database, not even the checkpoint the last connection to a
    /// file otherwise runs when it closes.
    init(path: String, create: Bool, readOnly: Bool = false) throws(SessionStoreError) {
        _ = Self.memoryStatisticsOff
        var handle: OpaquePointer?
        let access = readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0)
        let flags = access | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &handle, flags, nil)
        guard status == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(status))
            if let handle { sqlite3_close_v2(handle) }
            throw SessionStoreError(.unavailable, "cannot open the session store \(path): \(message)")
        }
        self.handle = handle
        self.path = path
        sqlite3_extended_result_codes(handle, 1)
        // A writer holding the lock briefly (a checkpoint) should not fail a reader.
        sqlite3_busy_timeout(handle, 5_000)
    }

    /// SQLite's memory statistics turned off, once, before the process opens its first
    /// connection: they lock a mutex shared by every connection around each allocation, and
    /// nothing here reads them. Not turned off (and harmless) if something else in the process
    /// opened a database first.
    private static let memoryStatisticsOff: Bool = csqlite_disable_memory_statistics() == SQLITE_OK

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    /// Runs SQL that returns no rows (one or more statements).
    func execute(_ sql: String) throws(SessionStoreError) {
        let status = sqlite3_exec(handle, sql, nil, nil, nil)
        guard status == SQLITE_OK else { throw error(status, doing: sql) }
    }

    /// Runs `body` in an immediate (write) transaction: committed when it returns, rolled back
    /// when it throws.
    func immediateTransaction<Result>(_ body: () throws(SessionStoreError) -> Result) throws(SessionStoreError) -> Result {
        try execute("BEGIN IMMEDIATE")
        do throws(SessionStoreError) {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// The statement for `sql`, prepared once and reset before it is handed out.
    func statement(_ sql: String) throws(SessionStoreError) -> Statement {
        if let prepared = statements[sql] {
            sqlite3_reset(prepared)
            sqlite3_clear_bindings(prepared)
            return Statement(handle: prepared, connection: self)
        }
        var prepared: OpaquePointer?
        let status = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, nil)
        guard status == SQLITE_OK, let prepared else { throw error(status, doing: sql) }
        statements[sql] = prepared
        return Statement(handle: prepared, connection: self)
    }

    /// The store's error for a failed call, classified.
    func error(_ status: Int32, doing what: String) -> SessionStoreError {
        let message = "\(path): \(String(cString: sqlite3_errmsg(handle))) (while running: \(what.prefix(80)))"
        switch status & 0xFF {
        case SQLITE_FULL:
            return SessionStoreError(.full, "the session store is full: " + message)
        case SQLITE_CORRUPT, SQLITE_NOTADB:
            return SessionStoreError(.corrupt, "the session store is damaged or not a database: " + message)
        default:
            return SessionStoreError(.unavailable, "the session store failed: " + message)
        }
    }
}

/// A prepared statement being bound and stepped.
struct Statement {
    let handle: OpaquePointer
    let connection: SQLiteConnection

    /// Binds `text` whole, with its length: a NUL in it does not end it.
    func bind(_ index: Int32, _ text: String) {
        var text = text
        text.withUTF8 { bytes in
            // An empty buffer may have no address, which SQLite would bind as NULL.
            let start = UnsafeRawPointer(bytes.baseAddress ?? ("" as StaticString).utf8Start)
            sqlite3_bind_text64(
                handle, index, start.assumingMemoryBound(to: CChar.self), UInt64(bytes.count), csqlite_transient(), UInt8(SQLITE_UTF8))
        }
    }

    func bind(_ index: Int32, _ value: Int64) {
        sqlite3_bind_int64(handle, index, value)
    }

    func bind(_ index: Int32, _ value: UInt64) {
        sqlite3_bind_int64(handle, index, Int64(bitPattern: value))
    }

    func bind(_ index: Int32, blob: [UInt8]) {
        blob.withUnsafeBytes { bytes in
            // An empty blob still binds as a (zero-length) blob, not NULL.
            _ = sqlite3_bind_blob(
                handle, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count),
                csqlite_transient())
        }
    }

    /// Binds a blob, or NULL for nil.
    func bind(_ index: Int32, optionalBlob blob: [UInt8]?) {
        if let blob { bind(index, blob: blob) } else { sqlite3_bind_null(handle, index) }
    }

    /// Binds a text, or NULL for nil.
    func bind(_ index: Int32, optionalText text: String?) {
        if let text { bind(index, text) } else { sqlite3_bind_null(handle, index) }
    }

    /// Steps a statement that returns no rows.
    func run() throws(SessionStoreError) {
        let status = sqlite3_step(handle)
        guard status == SQLITE_DONE else { throw connection.error(status, doing: String(cString: sqlite3_sql(handle))) }
    }

    /// Steps to the next row; false when there is none.
    func next() throws(SessionStoreError) -> Bool {
        let status = sqlite3_step(handle)
        if status == SQLITE_ROW { return true }
        guard status == SQLITE_DONE else { throw connection.error(status, doing: String(cString: sqlite3_sql(handle))) }
        return false
    }

    /// Lets go of the statement's rows, so that it holds no read open.
    func reset() {
        sqlite3_reset(handle)
    }

    /// How many rows the last `run` changed.
    var changes: Int { Int(sqlite3_changes(connection.handle)) }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    func uint64(_ column: Int32) -> UInt64 { UInt64(bitPattern: sqlite3_column_int64(handle, column)) }

    /// The text in `column`, whole (a NUL in it does not end it); empty when it is NULL.
    func text(_ column: Int32) -> String {
        // The text first, then its length in bytes, as SQLite's documentation asks.
        guard let bytes = sqlite3_column_text(handle, column) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(handle, column))), as: UTF8.self)
    }

    /// Whether `column` is NULL.
    func isNull(_ column: Int32) -> Bool {
        sqlite3_column_type(handle, column) == SQLITE_NULL
    }

    /// The blob in `column`, nil when it is NULL.
    func optionalBlob(_ column: Int32) -> [UInt8]? {
        isNull(column) ? nil : blob(column)
    }

    func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let bytes = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }
}
