import Logging
import NIOCore
import PostgresNIO
import ReactorHosting

/// Reading sessions out whole, for a copy to another store (`reactor-server copy`).
extension PostgresSessionStore {
    /// Up to `limit` session ids in ascending order after `id`, for a copy to another store.
    public func storedIDs(after id: String?, limit: Int) throws(SessionStoreError) -> [String] {
        let logger = self.logger
        return try reader.run { connection in try Self.storedIDs(after: id, limit: limit, on: connection, logger: logger) }
    }

    /// The sessions as ``load(id:)`` reads them, without claiming them: one transaction, one
    /// statement per table for all of them.
    public func export(ids: [String]) throws(SessionStoreError) -> [CopiedSession] {
        guard !ids.isEmpty else { return [] }
        let logger = self.logger
        let (location, capacity) = (self.location, historyCapacity)
        return try reader.run { connection in
            try connection.run("BEGIN", logger: logger)
            do {
                let sessions = try Self.export(ids: ids, on: connection, logger: logger, historyCapacity: capacity, location: location)
                try connection.run("COMMIT", logger: logger)
                return sessions
            } catch {
                _ = try? connection.run("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    /// The sessions some node holds a live claim on.
    public func servedSessions() throws(SessionStoreError) -> Int {
        let logger = self.logger
        return try reader.run { connection in try Self.servedSessions(on: connection, logger: logger) }
    }

    /// A session's columns, as loads read them.
    static let sessionColumns = "type, version, state, started_through, last_activity, epoch, published_ahead, shown_through, creation"

    /// Up to `limit` session ids in ascending order after `id`, read on `connection`.
    static func storedIDs(after id: String?, limit: Int, on connection: PostgresConnection, logger: Logger) throws -> [String] {
        try connection.run(
            "SELECT id FROM reactor_sessions WHERE id > \(id ?? "") ORDER BY id LIMIT \(max(0, limit))",
            logger: logger
        ).rows.map { try $0.decode(String.self) }
    }

    /// How many sessions some node holds a live claim on, read on `connection`.
    static func servedSessions(on connection: PostgresConnection, logger: Logger) throws -> Int {
        guard
            let row = try connection.run(
                "SELECT count(*) FROM reactor_sessions WHERE owner IS NOT NULL AND lease_until > now()",
                logger: logger
            ).rows.first
        else { return 0 }
        return Int(try row.decode(Int64.self))
    }

    /// The sessions with these ids, read on `connection` (inside the caller's transaction, so
    /// that the four tables are read as of one moment), in the order of `ids`.
    static func export(
        ids: [String], on connection: PostgresConnection, logger: Logger, historyCapacity: Int,
        location: PostgresLocation
    ) throws -> [CopiedSession] {
        guard !ids.isEmpty else { return [] }
        let sessions = connection.query(
            """
            SELECT id, \(unescaped: Self.sessionColumns) FROM reactor_sessions WHERE id = ANY(\(ids))
            """, logger: logger)
        let history = connection.query(
            """
            SELECT id, versions FROM reactor_history WHERE id = ANY(\(ids)) ORDER BY id, first_version
            """, logger: logger)
        let actions = connection.query(
            """
            SELECT id, seq, action, attempts FROM reactor_actions WHERE id = ANY(\(ids)) ORDER BY id, seq
            """, logger: logger)
        let keys = connection.query(
            "SELECT id, key, seq, digest FROM reactor_action_keys WHERE id = ANY(\(ids))",
            logger: logger)
        var parts: [String: StoredSessionParts] = [:]
        for row in try sessions.wait().rows {
            let (id, type, version, state, startedThrough, lastActivity, _, publishedAhead, shownThrough, creation) = try row.decode(
                (String, String, Int64, ByteBuffer, Int64, Int64, Int64, Bool, Int64, ByteBuffer).self)
            parts[id] = StoredSessionParts(
                type: type, version: version, state: state, startedThrough: startedThrough,
                lastActivity: lastActivity, publishedAhead: publishedAhead, shownThrough: shownThrough,
                creation: creation)
        }
        for row in try history.wait().rows {
            let (id, versions) = try row.decode((String, ByteBuffer).self)
            parts[id]?.history.append(versions)
        }
        for row in try actions.wait().rows {
            let (id, seq, action, attempts) = try row.decode((String, Int64, ByteBuffer, Int32).self)
            parts[id]?.actions.append((seq, action, attempts))
        }
        for row in try keys.wait().rows {
            let (id, key, seq, digest) = try row.decode((String, String, Int64, Int64).self)
            parts[id]?.keys.append(RememberedKey(key: key, seq: UInt64(bitPattern: seq), digest: UInt64(bitPattern: digest)))
        }
        return try ids.compactMap { id in
            try parts[id].map { CopiedSession(id: id, session: try $0.stored(capacity: historyCapacity, location: location)) }
        }
    }
}

/// One session's rows as the store's tables hold them, put together into a ``StoredSession``.
struct StoredSessionParts {
    let type: String
    let version: Int64
    let state: ByteBuffer
    let startedThrough: Int64
    let lastActivity: Int64
    let publishedAhead: Bool
    let shownThrough: Int64
    /// The JSON of its creation; empty when it was created without parameters or context.
    let creation: ByteBuffer
    /// Its history chunks, oldest first.
    var history: [ByteBuffer] = []
    /// Its pending actions, `(seq, action, attempts)`, by sequence.
    var actions: [(Int64, ByteBuffer, Int32)] = []
    var keys: [RememberedKey] = []

    /// The session, its history trimmed to `capacity` versions.
    /// - Throws: ``SessionStoreError/Kind/corrupt`` for a history chunk that does not decode.
    func stored(capacity: Int, location: PostgresLocation) throws(SessionStoreError) -> StoredSession {
        var stored = StoredSession(
            type: type, version: UInt64(bitPattern: version), state: Array(buffer: state),
            startedThrough: UInt64(bitPattern: startedThrough), lastActivity: lastActivity,
            history: [], pendingActions: [], publishedAhead: publishedAhead,
            shownThrough: UInt64(bitPattern: shownThrough),
            creation: creation.readableBytes == 0 ? nil : Array(buffer: creation))
        var versions: [SessionBatch.Version] = []
        for bytes in history {
            guard let chunk = HistoryChunk(decoding: Array(buffer: bytes)) else {
                throw SessionStoreError(.corrupt, "\(location): the stored history of a session is damaged")
            }
            versions += chunk.entries
        }
        stored.restore(
            versions: versions, capacity: capacity,
            pendingActions: actions.map { (UInt64(bitPattern: $0.0), Array(buffer: $0.1), Int($0.2)) }, keys: keys)
        return stored
    }
}
