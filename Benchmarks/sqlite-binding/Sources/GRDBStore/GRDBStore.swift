import Foundation
import GRDB
import Workload

/// The store's write and read path through GRDB: one DatabaseQueue (a single serialized
/// connection, as the C variant has), statements from the connection's statement cache
/// (`cachedStatement`), executed with `execute(arguments:)`, which binds strings and blobs
/// without copying them. Writes go through `write { }` (BEGIN IMMEDIATE … COMMIT), activations
/// through `read { }` (read-only savepoint) or `unsafeRead { }` (no transaction).
public final class GRDBStore: StoreBinding {
    private var queue: DatabaseQueue?

    public init(path: String) throws {
        var configuration = Configuration()
        configuration.journalMode = .wal
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.writeWithoutTransaction { db in
            // GRDB's WAL setup sets synchronous=NORMAL (commits not durable until a checkpoint):
            // the store wants every commit fsynced.
            try db.execute(sql: "PRAGMA synchronous = FULL")
            for sql in StoreSQL.schema { try db.execute(sql: sql) }
        }
        self.queue = queue
    }

    public func close() throws {
        try queue?.close()
        queue = nil
    }

    // MARK: Write path

    public func commit(_ writes: [Write]) throws {
        try queue!.write { db in
            let upsertInstance = try db.cachedStatement(sql: StoreSQL.upsertInstance)
            let insertHistory = try db.cachedStatement(sql: StoreSQL.insertHistory)
            let insertAction = try db.cachedStatement(sql: StoreSQL.insertAction)
            let deleteAction = try db.cachedStatement(sql: StoreSQL.deleteAction)
            for write in writes {
                try upsertInstance.execute(arguments: [write.id, write.type, write.version, write.state, write.lastActivity])
                try insertHistory.execute(arguments: [write.id, write.version, write.state])
                try insertAction.execute(arguments: [write.id, write.version, write.action])
                try deleteAction.execute(arguments: [write.id, write.version - 1])
            }
        }
    }

    // MARK: Read path

    public func activate(id: String) throws -> Activation? {
        try queue!.read { db in try Self.load(db, id: id) }
    }

    public func activateBare(id: String) throws -> Activation? {
        try queue!.unsafeRead { db in try Self.load(db, id: id) }
    }

    private static func load(_ db: Database, id: String) throws -> Activation? {
        let loadInstance = try db.cachedStatement(sql: StoreSQL.loadInstance)
        guard let row = try Row.fetchOne(loadInstance, arguments: [id]) else { return nil }
        var activation = Activation(type: row[0], version: row[1], state: row[2], lastActivity: row[3], history: [])
        activation.history.reserveCapacity(StoreSQL.historyDepth)
        let loadHistory = try db.cachedStatement(sql: StoreSQL.loadHistory)
        let rows = try Row.fetchCursor(loadHistory, arguments: [id])
        while let row = try rows.next() {
            activation.history.append(HistoryEntry(version: row[0], state: row[1]))
        }
        return activation
    }

    public func pragmas() throws -> (journalMode: String, synchronous: Int) {
        try queue!.unsafeRead { db in
            (try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "?", try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1)
        }
    }

    public func counts() throws -> (instances: Int, history: Int, actions: Int) {
        try queue!.read { db in
            (try Int.fetchOne(db, sql: "SELECT count(*) FROM instances") ?? -1,
             try Int.fetchOne(db, sql: "SELECT count(*) FROM history") ?? -1,
             try Int.fetchOne(db, sql: "SELECT count(*) FROM actions") ?? -1)
        }
    }

    // MARK: Bulk load

    public func populate(ids: [String], type: String, historyPerInstance: Int, states: [Data], instancesPerTransaction: Int) throws {
        let queue = queue!
        try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = OFF") }
        defer { try? queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") } }
        var index = 0
        while index < ids.count {
            let end = min(index + instancesPerTransaction, ids.count)
            try queue.write { db in
                let upsertInstance = try db.cachedStatement(sql: StoreSQL.upsertInstance)
                let insertHistory = try db.cachedStatement(sql: StoreSQL.insertHistory)
                for i in index..<end {
                    let id = ids[i]
                    for version in 1...historyPerInstance {
                        try insertHistory.execute(arguments: [id, version, states[(i &+ version) % states.count]])
                    }
                    try upsertInstance.execute(arguments: [id, type, historyPerInstance,
                                                           states[(i &+ historyPerInstance) % states.count], i])
                }
            }
            index = end
        }
    }
}
