/// Sessions that can be read out whole without being served: a store, or a snapshot of one, as
/// the source of a copy to another store (``SessionCopy``), such as a move from the embedded store
/// to a shared database, or a backup.
public protocol SessionExporting: AnyObject {
    /// Up to `limit` ids of stored sessions, in ascending order, after `id` (nil: from the first).
    func storedIDs(after id: String?, limit: Int) throws(SessionStoreError) -> [String]

    /// The stored sessions with these ids, as ``SessionStore/load(id:)`` gives them but read
    /// only (in a shared store, nobody's claim on them changes), in the order of `ids`; an id
    /// with no session (deleted since it was listed) is left out.
    func export(ids: [String]) throws(SessionStoreError) -> [CopiedSession]

    /// How many of its sessions running processes serve now (a claim on them is live), which a
    /// copy would miss the later writes of; 0 for a store that one process at a time opens.
    func servedSessions() throws(SessionStoreError) -> Int

    /// Lets go of what reading took (connections, locks).
    func close()
}

extension SessionExporting {
    /// A store that one process at a time opens: while the copy has it open, nobody serves it.
    public func servedSessions() throws(SessionStoreError) -> Int { 0 }
}

/// Sessions being written into a store that held none, all of them or none: nothing is seen
/// there until ``commit()``, and ``abandon()`` (or a process cut off before the commit) leaves
/// the destination as it was.
public protocol SessionImport: AnyObject {
    /// Writes sessions exactly as stored: their versions, states, histories, pending actions,
    /// remembered idempotency keys and the versions clients may have been shown past them. They
    /// are claimed by nobody: the first process that serves one claims it.
    func add(_ sessions: [CopiedSession]) throws(SessionStoreError)
    /// Makes every added session part of the store, and syncs it to disk.
    func commit() throws(SessionStoreError)
    /// Drops every added session; the destination stays as it was.
    func abandon()
}

/// A stored session with its id, as a copy moves it.
public struct CopiedSession: Sendable, Equatable {
    /// The session's id.
    public var id: String
    /// The session as stored.
    public var session: StoredSession

    /// A session to copy.
    public init(id: String, session: StoredSession) {
        self.id = id
        self.session = session
    }
}

/// Copies every session of one store into another that holds none (`reactor-server copy`).
public enum SessionCopy {
    /// What a copy wrote.
    public struct Summary: Sendable, Equatable {
        /// Sessions copied.
        public var sessions: Int
        /// Versions of their histories copied.
        public var versions: Int
        /// Accepted actions not yet settled, copied with their sessions (they run once, where the
        /// session is next served).
        public var pendingActions: Int

        /// What a copy wrote.
        public init(sessions: Int, versions: Int, pendingActions: Int) {
            self.sessions = sessions
            self.versions = versions
            self.pendingActions = pendingActions
        }
    }

    /// How many ids are read from the source at a time.
    public static let pageSize = 512

    /// Why sessions cannot be copied or replaced: `count` of them are served by running processes.
    public static func servedElsewhere(_ count: Int) -> SessionStoreError {
        SessionStoreError(
            .unavailable,
            "\(count) session\(count == 1 ? " is" : "s are") served by running processes; "
                + "stop them first (the sessions of a process that was killed are free once its lease has run out)")
    }

    /// A history capacity past any a store keeps: to read every stored version of a session.
    public static let wholeHistory = 1 << 20

    /// Copies every session of `source` into `destination`, then commits it; abandons it on any
    /// failure. Refuses a source whose sessions running processes serve, unless `whileServed`
    /// (a backup of a consistent snapshot, which later writes do not concern).
    /// - Throws: ``SessionStoreError`` saying what failed; the destination was left as it was.
    public static func copy(
        from source: any SessionExporting, into destination: any SessionImport,
        whileServed: Bool = false
    ) throws(SessionStoreError) -> Summary {
        do throws(SessionStoreError) {
            let served = whileServed ? 0 : try source.servedSessions()
            guard served == 0 else { throw servedElsewhere(served) }
            var summary = Summary(sessions: 0, versions: 0, pendingActions: 0)
            var last: String?
            while true {
                let ids = try source.storedIDs(after: last, limit: pageSize)
                let sessions = try source.export(ids: ids)
                try destination.add(sessions)
                summary.sessions += sessions.count
                for copied in sessions {
                    summary.versions += copied.session.history.count
                    summary.pendingActions += copied.session.pendingActions.count
                }
                guard ids.count == pageSize, let next = ids.last else { break }
                last = next
            }
            try destination.commit()
            return summary
        } catch {
            destination.abandon()
            throw error
        }
    }
}
