import Foundation
import Locking
import Logging
import NIOCore
import PostgresNIO
import ReactorHosting

/// The session store several nodes share: PostgreSQL, through PostgresNIO.
///
/// One node at a time serves a session, its owner. Each session row carries an owner, a lease
/// expiry and a fencing epoch:
/// - A new session is stored unclaimed. Loading a session claims it: the epoch goes up by one
///   and the lease is this node's, unless another node's lease on it is still live. Then the
///   load fails with ``SessionStoreError/Kind/ownedElsewhere`` and asks the owner, through a
///   `LISTEN`/`NOTIFY` channel, to hand the session over: sessions follow the proxy's routing.
/// - Every commit first locks the rows it writes and checks that each still has the epoch this
///   node claimed. A session claimed since by another node is refused whole (a stale writer):
///   nothing of it is written, and the host drops it from memory.
/// - A thread renews this node's leases every third of their length, and reports the sessions
///   it finds claimed by another node. If it cannot reach the database for a whole lease, every
///   session counts as lost: another node may claim them by now.
///
/// The schema is created, or checked, at start, under an advisory lock so that nodes starting
/// together do not race.
public final class PostgresSessionStore: SessionStore, SessionExporting {
    /// Where the database is.
    public let location: PostgresLocation
    /// This node's name, kept as the owner of the sessions it serves.
    public let node: String
    /// How long a claim lasts unless renewed.
    public let lease: Duration
    let historyCapacity: Int
    private let writer: PostgresLink
    /// Loads and look-ups, several at once (activations are served side by side).
    let reader: PostgresLinkPool
    let logger: Logger
    /// This node's claims on sessions, and the thread that renews them.
    private let leases: SessionLeases
    private let handOverHandler = Locked<(@Sendable (String) -> Void)?>(nil)
    /// Where nodes ask each other for sessions: `"<owner node>\n<session id>"`.
    private let handOverRequests: PostgresChannel
    /// The channel's name.
    static let handOverChannel = "reactor_handover"

    /// How many idle sessions one statement of ``deleteIdle(before:excluding:)`` deletes at most.
    private let idleDeletionBatch: Int
    /// How long a call may wait for the database unless told otherwise.
    public static let defaultTimeout = PostgresLink.defaultTimeout

    /// Connections reading sessions at once, at most: a load is a few round trips, so several
    /// activations side by side multiply how many a node brings back per second (after a
    /// failover, every client of the dead node comes at once).
    static let readerConnections = 4

    /// Connects, creates or checks the schema, and starts renewing leases.
    /// - Parameters:
    ///   - node: this node's name; a node that restarts under the same name takes its sessions
    ///     back at once rather than after their leases lapse.
    ///   - lease: how long a claim lasts unless renewed (`--lease-s`): after a node dies, its
    ///     sessions move to others within about that long.
    ///   - historyCapacity: versions kept per session for replay (at least the latest).
    ///   - idleDeletionBatch: how many idle sessions one statement of
    ///     ``deleteIdle(before:excluding:)`` deletes at most.
    ///   - timeout: how long a call may wait for the database before it fails as unavailable
    ///     and its connection is made again (a hung server, a network that drops packets).
    /// - Throws: ``SessionStoreError`` naming the database and what is wrong.
    public init(
        location: PostgresLocation, node: String, lease: Duration, historyCapacity: Int,
        idleDeletionBatch: Int = 1_000, timeout: Duration = PostgresSessionStore.defaultTimeout,
        logger: Logger = Logger(label: "reactor-server.postgres")
    ) throws(SessionStoreError) {
        self.idleDeletionBatch = max(1, idleDeletionBatch)
        self.location = location
        self.node = node
        self.lease = lease
        self.historyCapacity = max(1, historyCapacity)
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .notice)
        self.logger = quiet
        self.writer = PostgresLink(location: location, logger: quiet, timeout: timeout)
        self.reader = PostgresLinkPool(size: Self.readerConnections, location: location, logger: quiet, timeout: timeout)
        self.leases = SessionLeases(location: location, node: node, lease: lease, logger: quiet, timeout: timeout)
        try PostgresSchema.prepare(on: writer, location: location, logger: quiet)
        handOverRequests = PostgresChannel(location: location, name: Self.handOverChannel, logger: quiet)
        leases.start()
        handOverRequests.subscribe { [weak self] message in self?.heardHandOverRequest(message) }
    }

    public func onHandOverRequested(_ handler: @escaping @Sendable (String) -> Void) {
        handOverHandler.withLock { $0 = handler }
    }

    /// Passes on a request for a session this node holds.
    private func heardHandOverRequest(_ message: [UInt8]) {
        let parts = message.split(separator: UInt8(ascii: "\n"), maxSplits: 1)
        guard parts.count == 2, String(decoding: parts[0], as: UTF8.self) == node else { return }
        let id = String(decoding: parts[1], as: UTF8.self)
        guard leases.holds(id), let handler = handOverHandler.withLock({ $0 }) else { return }
        handler(id)
    }

    public var isShared: Bool { true }

    public func onOwnershipLost(_ handler: @escaping @Sendable (Set<String>) -> Void) {
        leases.onLost(handler)
    }

    // MARK: - Writing

    public func commit(_ writes: [SessionWrite]) throws(SessionStoreError) -> Set<String> {
        let batch = SessionBatch(writes)
        let logger = self.logger
        let outcome = try writer.run { connection -> BatchOutcome in
            try connection.run("BEGIN", logger: logger)
            do {
                let outcome = try apply(batch, on: connection)
                try connection.run("COMMIT", logger: logger)
                return outcome
            } catch {
                _ = try? connection.run("ROLLBACK", logger: logger)
                throw error
            }
        }
        leases.update(claimed: outcome.claimed, released: outcome.released.union(outcome.stale))
        return outcome.stale
    }

    /// What one committed batch changed of this node's claims.
    private struct BatchOutcome {
        var stale: Set<String> = []
        var claimed: [String: Int64] = [:]
        var released: Set<String> = []
    }

    /// The batch's writes, inside its transaction: the rows it writes are locked and their
    /// epochs checked first; then every write of a session still this node's is sent at once
    /// (pipelined) and the results awaited.
    private func apply(_ batch: SessionBatch, on connection: PostgresConnection) throws -> BatchOutcome {
        var outcome = BatchOutcome()
        var created: Set<String> = []
        for case .create(let id, _, _, _, _, _) in batch.writes { created.insert(id) }
        let fenced = Array(batch.sessionIDs.subtracting(created))
        // The epoch of each existing session the batch writes, its row locked until the commit,
        // so that no other node can claim it in between.
        var epochs: [String: Int64] = [:]
        if !fenced.isEmpty {
            // Locked in id order, as every statement here that locks several rows does, so that two
            // of them never wait on each other (a deadlock).
            let rows = try connection.run(
                "SELECT id, epoch FROM reactor_sessions WHERE id = ANY(\(fenced)) ORDER BY id FOR UPDATE",
                logger: logger
            ).rows
            for row in rows {
                let (id, epoch) = try row.decode((String, Int64).self)
                epochs[id] = epoch
            }
        }
        for (id, epoch) in leases.epochs(of: epochs.keys) where epoch != epochs[id] { outcome.stale.insert(id) }

        var exists: [String: Bool] = [:]
        func sessionExists(_ id: String) -> Bool { exists[id] ?? (epochs[id] != nil) }
        var pending: [EventLoopFuture<PostgresQueryResult>] = []
        /// Each statement that wrote versions, with the sessions it wrote: those it did not move
        /// forward were overtaken by another writer.
        var versionWrites: [(ids: [String], result: EventLoopFuture<PostgresQueryResult>)] = []
        func send(_ query: PostgresQuery) -> EventLoopFuture<PostgresQueryResult> {
            let future = connection.query(query, logger: logger)
            pending.append(future)
            return future
        }
        // The records of accepted actions, and the settled ones to delete, go in one statement
        // each (sent before a delete of a session, which must follow them, and at the end): a
        // statement per action was most of what a commit cost this node and PostgreSQL.
        var records = ActionRecords()
        // So do the sessions' versions, two statements for all (sent at the same points).
        var rows = VersionRows()
        func sendGathered() {
            for query in records.queries() { _ = send(query) }
            records = ActionRecords()
            guard !rows.isEmpty else { return }
            versionWrites.append((rows.ids, send(rows.rowsQuery())))
            if let trim = rows.trimQuery() { _ = send(trim) }
            rows = VersionRows()
        }
        for write in batch.writes where !outcome.stale.contains(write.instanceID) {
            switch write {
            case .create(let id, let type, let state, let lastActivity, let publishingAhead, let creation):
                let chunk = HistoryChunk(entries: [SessionBatch.Version(version: 0, producedBy: 0, state: state)])
                // Unclaimed: the node the proxy routes its id to claims it on its first request.
                _ = send(
                    """
                    INSERT INTO reactor_sessions(id, type, version, state, started_through, last_activity, owner, epoch, lease_until,
                        published_ahead, creation, subject)
                    VALUES (\(id), \(type), 0, \(ByteBuffer(bytes: state)), 0, \(lastActivity), NULL, 0, NULL, \(publishingAhead),
                        \(ByteBuffer(bytes: creation ?? [])), \(creation.flatMap(SessionWrite.owner(ofCreation:))))
                    """)
                _ = send(
                    """
                    INSERT INTO reactor_history(id, first_version, last_version, versions)
                    VALUES (\(id), 0, 0, \(ByteBuffer(bytes: chunk.encoded())))
                    """)
                exists[id] = true
            case .accept(let id, let seq, let action, let key):
                if let key, sessionExists(id) {
                    _ = send(
                        """
                        INSERT INTO reactor_action_keys(id, key, seq, digest)
                        VALUES (\(id), \(key.key), \(Int64(bitPattern: key.seq)), \(Int64(bitPattern: key.digest)))
                        ON CONFLICT (id, key) DO UPDATE SET seq = EXCLUDED.seq, digest = EXCLUDED.digest
                        """)
                    // Now and then, the keys of actions that left the window go.
                    if let through = RememberedKey.forgottenThrough(accepting: key.seq) {
                        _ = send("DELETE FROM reactor_action_keys WHERE id = \(id) AND seq <= \(Int64(bitPattern: through))")
                    }
                }
                guard !batch.settlesLater(id: id, seq: seq), sessionExists(id) else { continue }
                records.accept(id: id, seq: seq, action: action)
            case .settle(let id, let seq):
                guard !batch.acceptedInBatch(id: id, seq: seq), sessionExists(id) else { continue }
                records.settle(id: id, seq: seq)
            case .attempt(let id, let seq):
                guard sessionExists(id) else { continue }
                // After the records gathered so far, which may hold its own: a restart's few attempts
                // cost a statement each.
                sendGathered()
                _ = send(
                    "UPDATE reactor_actions SET attempts = attempts + 1 WHERE id = \(id) AND seq = \(Int64(bitPattern: seq))")
            case .version(let id, let version, let state, let startedThrough, _, let lastActivity):
                guard let entries = batch.versions(of: id, endingAt: version), sessionExists(id) else { continue }
                rows.write(
                    id: id, version: version, state: state, startedThrough: startedThrough, lastActivity: lastActivity,
                    entries: entries,
                    trimThrough: HistoryChunk.trimmedThrough(
                        firstVersion: entries[0].version, lastVersion: version, capacity: historyCapacity))
            case .touch(let id, let lastActivity):
                guard sessionExists(id) else { continue }
                _ = send("UPDATE reactor_sessions SET last_activity = greatest(last_activity, \(lastActivity)) WHERE id = \(id)")
            case .delete(let id):
                sendGathered()
                _ = send("DELETE FROM reactor_sessions WHERE id = \(id)")
                _ = send("DELETE FROM reactor_history WHERE id = \(id)")
                _ = send("DELETE FROM reactor_actions WHERE id = \(id)")
                _ = send("DELETE FROM reactor_action_keys WHERE id = \(id)")
                exists[id] = false
                outcome.released.insert(id)
            case .release(let id):
                guard sessionExists(id) else { continue }
                _ = send("UPDATE reactor_sessions SET owner = NULL, lease_until = NULL, published_ahead = false WHERE id = \(id)")
                outcome.released.insert(id)
                outcome.claimed[id] = nil
            case .publishingAhead(let id):
                guard sessionExists(id) else { continue }
                _ = send("UPDATE reactor_sessions SET published_ahead = true WHERE id = \(id)")
            }
        }
        sendGathered()
        // Every result is awaited, so that an error anywhere fails the batch (after an error,
        // PostgreSQL would answer the COMMIT with a rollback).
        for future in pending { _ = try future.wait() }
        for (ids, result) in versionWrites {
            var moved: Set<String> = []
            for row in try result.wait().rows { moved.insert(try row.decode(String.self)) }
            for id in ids where !moved.contains(id) { outcome.stale.insert(id) }
        }
        return outcome
    }

    public func withdrawAttempts(_ attempts: [String: [UInt64]]) throws(SessionStoreError) {
        let pairs = attempts.flatMap { id, seqs in seqs.map { (id, Int64(bitPattern: $0)) } }
        if pairs.isEmpty { return }
        let ids = pairs.map(\.0)
        let seqs = pairs.map(\.1)
        let logger = self.logger
        try writer.run { connection in
            // Whichever node serves the session now: an attempt this process counted did not end it.
            _ = try connection.run(
                """
                UPDATE reactor_actions a SET attempts = a.attempts - 1
                FROM unnest(\(ids)::text[], \(seqs)::bigint[]) AS w(id, seq)
                WHERE a.id = w.id AND a.seq = w.seq AND a.attempts > 0
                """, logger: logger)
        }
    }

    public func deleteIdle(before cutoff: Int64, excluding: Set<String>) throws(SessionStoreError) -> [String] {
        // In batches, each a call of its own: a sweep after a long quiet spell can find many, and
        // one statement deleting them all could outlast the link's timeout and hold up commits.
        var deleted: [String] = []
        while true {
            let batch = try deleteIdleBatch(before: cutoff, excluding: excluding)
            deleted += batch
            if batch.count < idleDeletionBatch { return deleted }
        }
    }

    private func deleteIdleBatch(before cutoff: Int64, excluding: Set<String>) throws(SessionStoreError) -> [String] {
        let logger = self.logger
        let live = Array(excluding)
        let limit = idleDeletionBatch
        return try writer.run { connection -> [String] in
            // Not those another node serves: its lease is live, and it keeps their activity.
            let result = try connection.run(
                """
                WITH doomed AS (
                    SELECT id FROM reactor_sessions
                    WHERE last_activity < \(cutoff) AND (lease_until IS NULL OR lease_until < now()) AND NOT (id = ANY(\(live)))
                    ORDER BY id LIMIT \(limit) FOR UPDATE SKIP LOCKED),
                gone AS (DELETE FROM reactor_sessions WHERE id IN (SELECT id FROM doomed) RETURNING id),
                history AS (DELETE FROM reactor_history WHERE id IN (SELECT id FROM gone)),
                actions AS (DELETE FROM reactor_actions WHERE id IN (SELECT id FROM gone)),
                keys AS (DELETE FROM reactor_action_keys WHERE id IN (SELECT id FROM gone))
                SELECT id FROM gone
                """, logger: logger)
            return try result.rows.map { try $0.decode(String.self) }
        }
    }

    // MARK: - Reading

    /// Loads the session and claims it for this node.
    public func load(id: String) throws(SessionStoreError) -> StoredSession? {
        guard let (stored, epoch) = try read(id: id, claiming: true) else { return nil }
        leases.update(claimed: [id: epoch], released: [])
        return stored
    }

    /// Reads the session in one transaction, claiming it for this node when `claiming`: then a
    /// session another node's live lease holds throws ``SessionStoreError/Kind/ownedElsewhere``.
    private func read(id: String, claiming: Bool) throws(SessionStoreError) -> (session: StoredSession, epoch: Int64)? {
        let logger = self.logger
        let lease = self.lease.timeInterval
        let node = self.node
        let loaded = try reader.run { connection -> (StoredSession, Int64)?? in
            try connection.run("BEGIN", logger: logger)
            do {
                let columns = Self.sessionColumns
                let session: PostgresQuery =
                    claiming
                    ? """
                    UPDATE reactor_sessions SET owner = \(node), epoch = epoch + 1, lease_until = now() + make_interval(secs => \(lease))
                    WHERE id = \(id) AND (owner IS NULL OR owner = \(node) OR lease_until < now())
                    RETURNING \(unescaped: columns)
                    """
                    : "SELECT \(unescaped: columns) FROM reactor_sessions WHERE id = \(id)"
                let claim = connection.query(session, logger: logger)
                let history = connection.query(
                    "SELECT versions FROM reactor_history WHERE id = \(id) ORDER BY first_version",
                    logger: logger)
                let actions = connection.query(
                    "SELECT seq, action, attempts FROM reactor_actions WHERE id = \(id) ORDER BY seq",
                    logger: logger)
                let keys = connection.query("SELECT key, seq, digest FROM reactor_action_keys WHERE id = \(id)", logger: logger)
                let (claimRows, historyRows, actionRows) = (try claim.wait().rows, try history.wait().rows, try actions.wait().rows)
                let keyRows = try keys.wait().rows
                guard let row = claimRows.first else {
                    guard claiming else {
                        try connection.run("COMMIT", logger: logger)
                        return .some(nil)
                    }
                    // Held by another node: ask it to hand the session over (the proxy routes
                    // the id here), and send the client on meanwhile.
                    let found = try connection.run(
                        """
                        SELECT pg_notify(\(Self.handOverChannel), coalesce(owner, '') || E'\\n' || id) FROM reactor_sessions WHERE id = \(id)
                        """, logger: logger
                    ).rows
                    try connection.run("COMMIT", logger: logger)
                    return found.isEmpty ? .some(nil) : nil
                }
                try connection.run("COMMIT", logger: logger)
                let (type, version, state, startedThrough, lastActivity, epoch, publishedAhead, shownThrough, creation) = try row.decode(
                    (String, Int64, ByteBuffer, Int64, Int64, Int64, Bool, Int64, ByteBuffer).self)
                var parts = StoredSessionParts(
                    type: type, version: version, state: state, startedThrough: startedThrough,
                    lastActivity: lastActivity, publishedAhead: publishedAhead, shownThrough: shownThrough,
                    creation: creation)
                parts.history = try historyRows.map { try $0.decode(ByteBuffer.self) }
                parts.actions = try actionRows.map { try $0.decode((Int64, ByteBuffer, Int32).self) }
                parts.keys = try keyRows.map { row in
                    let (key, seq, digest) = try row.decode((String, Int64, Int64).self)
                    return RememberedKey(key: key, seq: UInt64(bitPattern: seq), digest: UInt64(bitPattern: digest))
                }
                let stored = try parts.stored(capacity: historyCapacity, location: location)
                return .some((stored, epoch))
            } catch {
                _ = try? connection.run("ROLLBACK", logger: logger)
                throw error
            }
        }
        // The outer nil: the session exists, but another node's lease on it is live.
        guard let found = loaded else {
            throw SessionStoreError(.ownedElsewhere, "another node serves this session")
        }
        return found.map { (session: $0.0, epoch: $0.1) }
    }

    public func contains(id: String) throws(SessionStoreError) -> Bool {
        let logger = self.logger
        return try reader.run { connection in
            !(try connection.run("SELECT 1 FROM reactor_sessions WHERE id = \(id)", logger: logger).rows.isEmpty)
        }
    }

    public func count() throws(SessionStoreError) -> Int {
        let logger = self.logger
        return try reader.run { connection in
            guard let row = try connection.run("SELECT count(*) FROM reactor_sessions", logger: logger).rows.first else { return 0 }
            return Int(try row.decode(Int64.self))
        }
    }

    /// How many stored sessions `owner` created, read from the index of sessions by subject.
    public func count(owner: String) throws(SessionStoreError) -> Int {
        let logger = self.logger
        return try reader.run { connection in
            let rows = try connection.run("SELECT count(*) FROM reactor_sessions WHERE subject = \(owner)", logger: logger).rows
            guard let row = rows.first else { return 0 }
            return Int(try row.decode(Int64.self))
        }
    }

    /// The store's tables in the database, their indexes and TOAST data included.
    public func diskUsage() throws(SessionStoreError) -> Int? {
        let logger = self.logger
        return try reader.run { connection in
            let rows = try connection.run(
                """
                SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class AS c
                WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace AND c.relname LIKE 'reactor\\_%'
                """, logger: logger
            ).rows
            guard let row = rows.first else { return 0 }
            return Int(try row.decode(Int64.self))
        }
    }

    public func close() {
        leases.stop()
        handOverRequests.close()
        writer.close()
        reader.close()
    }

    /// The error of the last renewal of the leases (a check that the database answers, while
    /// this node holds none), every `--lease-s` / 3; or, when none has succeeded for a whole
    /// lease (a database that hangs), that.
    public var outage: SessionStoreError? { leases.outage }
}
