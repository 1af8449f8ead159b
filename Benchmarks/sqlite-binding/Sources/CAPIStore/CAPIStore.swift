import CSQLite
import Foundation
import Workload

/// The store's write and read path on SQLite's C API: one connection, every statement prepared
/// once with SQLITE_PREPARE_PERSISTENT and reused through bind / step / reset.
public final class CAPIStore: StoreBinding {
    private var db: OpaquePointer?
    private let begin: OpaquePointer
    private let beginRead: OpaquePointer
    private let commitStatement: OpaquePointer
    private let upsertInstance: OpaquePointer
    private let insertHistory: OpaquePointer
    private let insertAction: OpaquePointer
    private let deleteAction: OpaquePointer
    private let loadInstance: OpaquePointer
    private let loadHistory: OpaquePointer

    public init(path: String) throws {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        guard sqlite3_open_v2(path, &handle, flags, nil) == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(handle)
            throw BindingError("open \(path): \(message)")
        }
        db = handle
        do {
            try Self.exec(handle, "PRAGMA journal_mode = WAL")
            try Self.exec(handle, "PRAGMA synchronous = FULL")
            for sql in StoreSQL.schema { try Self.exec(handle, sql) }
            begin = try Self.prepare(handle, "BEGIN IMMEDIATE")
            beginRead = try Self.prepare(handle, "BEGIN DEFERRED")
            commitStatement = try Self.prepare(handle, "COMMIT")
            upsertInstance = try Self.prepare(handle, StoreSQL.upsertInstance)
            insertHistory = try Self.prepare(handle, StoreSQL.insertHistory)
            insertAction = try Self.prepare(handle, StoreSQL.insertAction)
            deleteAction = try Self.prepare(handle, StoreSQL.deleteAction)
            loadInstance = try Self.prepare(handle, StoreSQL.loadInstance)
            loadHistory = try Self.prepare(handle, StoreSQL.loadHistory)
        } catch {
            sqlite3_close_v2(handle)  // finalizes nothing prepared so far: close_v2 defers until they are
            throw error
        }
    }

    deinit { try? close() }

    public func close() throws {
        guard let db else { return }
        for statement in [begin, beginRead, commitStatement, upsertInstance, insertHistory, insertAction,
                          deleteAction, loadInstance, loadHistory] {
            sqlite3_finalize(statement)
        }
        let code = sqlite3_close_v2(db)
        self.db = nil
        guard code == SQLITE_OK else { throw BindingError("close: \(code)") }
    }

    // MARK: Write path

    public func commit(_ writes: [Write]) throws {
        try run(begin)
        do {
            for write in writes { try apply(write) }
            try run(commitStatement)
        } catch {
            sqlite3_exec(db, "ROLLBACK", nil, nil, nil)
            throw error
        }
    }

    private func apply(_ write: Write) throws {
        try write.state.withUnsafeBytes { state in
            bindText(upsertInstance, 1, write.id)
            bindText(upsertInstance, 2, write.type)
            sqlite3_bind_int64(upsertInstance, 3, write.version)
            bindBlob(upsertInstance, 4, state)
            sqlite3_bind_int64(upsertInstance, 5, write.lastActivity)
            try run(upsertInstance)

            bindText(insertHistory, 1, write.id)
            sqlite3_bind_int64(insertHistory, 2, write.version)
            bindBlob(insertHistory, 3, state)
            try run(insertHistory)
        }
        try write.action.withUnsafeBytes { action in
            bindText(insertAction, 1, write.id)
            sqlite3_bind_int64(insertAction, 2, write.version)
            bindBlob(insertAction, 3, action)
            try run(insertAction)
        }
        bindText(deleteAction, 1, write.id)
        sqlite3_bind_int64(deleteAction, 2, write.version - 1)
        try run(deleteAction)
    }

    // MARK: Read path

    public func activate(id: String) throws -> Activation? {
        try run(beginRead)
        defer { _ = try? run(commitStatement) }
        return try activateBare(id: id)
    }

    public func activateBare(id: String) throws -> Activation? {
        bindText(loadInstance, 1, id)
        defer { sqlite3_reset(loadInstance) }
        switch sqlite3_step(loadInstance) {
        case SQLITE_ROW: break
        case SQLITE_DONE: return nil
        case let code: throw error(code)
        }
        var activation = Activation(
            type: String(cString: sqlite3_column_text(loadInstance, 0)),
            version: sqlite3_column_int64(loadInstance, 1),
            state: blob(loadInstance, 2),
            lastActivity: sqlite3_column_int64(loadInstance, 3),
            history: [])
        activation.history.reserveCapacity(StoreSQL.historyDepth)

        bindText(loadHistory, 1, id)
        defer { sqlite3_reset(loadHistory) }
        while true {
            switch sqlite3_step(loadHistory) {
            case SQLITE_ROW:
                activation.history.append(HistoryEntry(version: sqlite3_column_int64(loadHistory, 0),
                                                       state: blob(loadHistory, 1)))
            case SQLITE_DONE:
                return activation
            case let code:
                throw error(code)
            }
        }
    }

    public func pragmas() throws -> (journalMode: String, synchronous: Int) {
        (try queryText("PRAGMA journal_mode"), Int(try queryInt("PRAGMA synchronous")))
    }

    public func counts() throws -> (instances: Int, history: Int, actions: Int) {
        (Int(try queryInt("SELECT count(*) FROM instances")),
         Int(try queryInt("SELECT count(*) FROM history")),
         Int(try queryInt("SELECT count(*) FROM actions")))
    }

    /// The SQLite library this binding runs on.
    public static var sqliteVersion: String { String(cString: sqlite3_libversion()) }

    // MARK: Bulk load

    public func populate(ids: [String], type: String, historyPerInstance: Int, states: [Data], instancesPerTransaction: Int) throws {
        try Self.exec(db!, "PRAGMA synchronous = OFF")
        defer { try? Self.exec(db!, "PRAGMA synchronous = FULL") }
        var index = 0
        while index < ids.count {
            let end = min(index + instancesPerTransaction, ids.count)
            try run(begin)
            for i in index..<end {
                let id = ids[i]
                for version in 1...historyPerInstance {
                    try states[(i &+ version) % states.count].withUnsafeBytes { state in
                        bindText(insertHistory, 1, id)
                        sqlite3_bind_int64(insertHistory, 2, Int64(version))
                        bindBlob(insertHistory, 3, state)
                        try run(insertHistory)
                    }
                }
                try states[(i &+ historyPerInstance) % states.count].withUnsafeBytes { state in
                    bindText(upsertInstance, 1, id)
                    bindText(upsertInstance, 2, type)
                    sqlite3_bind_int64(upsertInstance, 3, Int64(historyPerInstance))
                    bindBlob(upsertInstance, 4, state)
                    sqlite3_bind_int64(upsertInstance, 5, Int64(i))
                    try run(upsertInstance)
                }
            }
            try run(commitStatement)
            index = end
        }
    }

    // MARK: Plumbing

    @inline(__always)
    private func bindText(_ statement: OpaquePointer, _ index: Int32, _ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            _ = utf8.withMemoryRebound(to: CChar.self) {
                csqlite_bind_text_transient(statement, index, $0.baseAddress, Int32($0.count))
            }
        }
    }

    /// The bytes must outlive the statement's step (the callers step inside `withUnsafeBytes`).
    @inline(__always)
    private func bindBlob(_ statement: OpaquePointer, _ index: Int32, _ bytes: UnsafeRawBufferPointer) {
        csqlite_bind_blob_static(statement, index, bytes.baseAddress, Int32(bytes.count))
    }

    @inline(__always)
    private func blob(_ statement: OpaquePointer, _ column: Int32) -> Data {
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return Data() }
        return Data(bytes: bytes, count: count)
    }

    /// Steps a statement that returns no row to completion and resets it.
    @inline(__always)
    private func run(_ statement: OpaquePointer) throws {
        let code = sqlite3_step(statement)
        sqlite3_reset(statement)
        guard code == SQLITE_DONE else { throw error(code) }
    }

    private func error(_ code: Int32) -> BindingError {
        BindingError("sqlite \(code): \(String(cString: sqlite3_errmsg(db)))")
    }

    private func queryInt(_ sql: String) throws -> Int64 {
        try withSingleRow(sql) { sqlite3_column_int64($0, 0) }
    }

    private func queryText(_ sql: String) throws -> String {
        try withSingleRow(sql) { String(cString: sqlite3_column_text($0, 0)) }
    }

    private func withSingleRow<T>(_ sql: String, _ body: (OpaquePointer) -> T) throws -> T {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw BindingError("prepare \(sql): \(String(cString: sqlite3_errmsg(db)))")
        }
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else { throw BindingError("\(sql): no row") }
        return body(statement)
    }

    private static func prepare(_ db: OpaquePointer, _ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK,
              let statement
        else { throw BindingError("prepare \(sql): \(String(cString: sqlite3_errmsg(db)))") }
        return statement
    }

    private static func exec(_ db: OpaquePointer, _ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(db, sql, nil, nil, &message) == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? "?"
            sqlite3_free(message)
            throw BindingError("\(sql): \(text)")
        }
    }
}
