import Foundation
import ReactorHosting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A new SQLite session store filled with sessions copied from another store (``SessionCopy``).
///
/// The store is made beside its path under a name of its own (`PATH.partial-PID`), written in
/// one transaction, checked, synced to disk, and only then linked into place: a copy cut off
/// (killed, a full disk) never leaves a store under `PATH`, and the link refuses a file made there
/// meanwhile (a server started on the path), which is left alone.
public final class SQLiteSessionImport: SessionImport {
    /// Where the store will be.
    public let path: String
    /// Whether ``commit()`` put the store at ``path``.
    public private(set) var isCommitted = false
    private let partial: String
    private var connection: SQLiteConnection?

    /// Starts a store at `path`, where nothing may be yet (its directory is made when missing).
    /// - Throws: ``SessionStoreError`` naming the path and what is wrong; nothing is left behind.
    public init(path: String) throws(SessionStoreError) {
        self.path = path
        partial = "\(path).partial-\(getpid())"
        guard !StoreFileCopy.exists(path) else { throw Self.taken(path) }
        guard !StoreFileCopy.exists(partial) else {
            throw SessionStoreError(.unavailable, "cannot write \(partial): it already exists")
        }
        do throws(SessionStoreError) {
            // Made as the server makes a store (schema, write-ahead log, a private file), then
            // closed: what is copied goes in through a connection of its own, in one transaction.
            try SQLiteSessionStore(path: partial, historyCapacity: 1).close()
            unlink(partial + ".lock")
            let connection = try SQLiteConnection(path: partial, create: false)
            try connection.execute("PRAGMA synchronous=FULL")
            try connection.execute("BEGIN IMMEDIATE")
            self.connection = connection
        } catch {
            StoreFileCopy.removeStore(at: partial)
            throw error
        }
    }

    public func add(_ sessions: [CopiedSession]) throws(SessionStoreError) {
        guard let connection else { throw SessionStoreError(.unavailable, "the copy into \(path) has ended") }
        for copied in sessions { try add(id: copied.id, session: copied.session, on: connection) }
    }

    private func add(id: String, session: StoredSession, on connection: SQLiteConnection) throws(SessionStoreError) {
        let row = try connection.statement(
            """
            INSERT INTO sessions(id, type, version, state, started_through, last_activity, published_ahead, shown_through,
                                 creation, subject)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        row.bind(1, id)
        row.bind(2, session.type)
        row.bind(3, session.version)
        row.bind(4, blob: session.state)
        row.bind(5, session.startedThrough)
        row.bind(6, session.lastActivity)
        row.bind(7, Int64(session.publishedAhead ? 1 : 0))
        row.bind(8, session.shownThrough)
        row.bind(9, optionalBlob: session.creation)
        row.bind(10, optionalText: session.owner)
        try row.run()
        // The history as one chunk; a session stored without one keeps its state as its history.
        let entries =
            session.history.isEmpty
            ? [SessionBatch.Version(version: session.version, producedBy: 0, state: session.state)] : session.history
        let history = try connection.statement("INSERT INTO history(id, first_version, last_version, versions) VALUES (?, ?, ?, ?)")
        history.bind(1, id)
        history.bind(2, entries[0].version)
        history.bind(3, entries[entries.count - 1].version)
        history.bind(4, blob: HistoryChunk(entries: entries).encoded())
        try history.run()
        let action = try connection.statement("INSERT INTO actions(id, seq, action, attempts) VALUES (?, ?, ?, ?)")
        for pending in session.pendingActions {
            action.reset()
            action.bind(1, id)
            action.bind(2, pending.seq)
            action.bind(3, blob: pending.action)
            action.bind(4, Int64(pending.attempts))
            try action.run()
        }
        let key = try connection.statement("INSERT INTO action_keys(id, key, seq, digest) VALUES (?, ?, ?, ?)")
        for remembered in session.rememberedKeys {
            key.reset()
            key.bind(1, id)
            key.bind(2, remembered.key)
            key.bind(3, remembered.seq)
            key.bind(4, remembered.digest)
            try key.run()
        }
    }

    public func commit() throws(SessionStoreError) {
        guard let connection else { throw SessionStoreError(.unavailable, "the copy into \(path) has ended") }
        do throws(SessionStoreError) {
            try connection.execute("COMMIT")
            // Into the file, so that the file alone is the whole store when it takes its name.
            try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.connection = nil
            _ = try StoreFileCopy.check(partial)
            try StoreFileCopy.sync(partial)
            try StoreFileCopy.publish(partial, as: path, naming: path, taken: Self.taken(path))
            isCommitted = true
            StoreFileCopy.removeStore(at: partial)
            try StoreFileCopy.syncDirectory(of: path)
        } catch {
            abandon()
            throw error
        }
    }

    public func abandon() {
        if let connection { try? connection.execute("ROLLBACK") }
        connection = nil
        StoreFileCopy.removeStore(at: partial)
    }

    private static func taken(_ path: String) -> SessionStoreError {
        SessionStoreError(.unavailable, "cannot write \(path): it already exists; a copy never writes over a store, so name a new file")
    }
}
