import Dispatch
import Locking
import Logging
import PostgresNIO
import ReactorHosting

/// This node's claims on the sessions it serves, and the thread that renews their leases every
/// third of their length on a connection of its own (so that a commit waiting on a row lock never
/// holds up a renewal). A session it finds claimed by another node, or every one once the database
/// has been out of reach for a whole lease, is reported lost.
final class SessionLeases: Sendable {
    private let location: PostgresLocation
    private let node: String
    private let lease: Duration
    private let logger: Logger
    private let renewer: PostgresLink
    /// The epoch of each session this node has claimed.
    private let claims = Locked<[String: Int64]>([:])
    private let keeper = Locked<LeaseKeeper?>(nil)
    private let lostHandler = Locked<(@Sendable (Set<String>) -> Void)?>(nil)
    /// When the leases were last renewed (monotonic nanoseconds).
    private let lastRenewal = Locked<UInt64>(DispatchTime.now().uptimeNanoseconds)
    /// Why the last renewal (or, holding no lease, the last check that the database answers)
    /// failed; nil once one succeeds.
    private let lastRenewalError = Locked<SessionStoreError?>(nil)

    init(location: PostgresLocation, node: String, lease: Duration, logger: Logger, timeout: Duration) {
        self.location = location
        self.node = node
        self.lease = lease
        self.logger = logger
        self.renewer = PostgresLink(location: location, logger: logger, timeout: timeout)
    }

    /// Starts renewing, every third of a lease.
    func start() {
        let keeper = LeaseKeeper(period: lease / 3) { [weak self] in self?.renew() }
        self.keeper.withLock { $0 = keeper }
    }

    /// Stops renewing and closes the connection; returns once the renewing thread has stopped.
    func stop() {
        keeper.withLock { keeper in
            keeper?.stop()
            keeper = nil
        }
        renewer.close()
    }

    /// Registers what to call with the sessions found lost.
    func onLost(_ handler: @escaping @Sendable (Set<String>) -> Void) {
        lostHandler.withLock { $0 = handler }
    }

    /// Whether this node holds a claim on the session.
    func holds(_ id: String) -> Bool {
        claims.withLock { $0[id] != nil }
    }

    /// The epoch of this node's claim on each of `ids`, nil for one it holds none on.
    func epochs(of ids: some Sequence<String>) -> [(String, Int64?)] {
        claims.withLock { claims in ids.map { ($0, claims[$0]) } }
    }

    /// Records claims made (with their epochs) and claims let go of.
    func update(claimed: [String: Int64], released: Set<String>) {
        claims.withLock { claims in
            for (id, epoch) in claimed { claims[id] = epoch }
            for id in released { claims[id] = nil }
        }
    }

    /// The error of the last renewal of the leases (a check that the database answers, while
    /// this node holds none); or, when none has succeeded for a whole lease (a database that
    /// hangs), that.
    var outage: SessionStoreError? {
        let since = DispatchTime.now().uptimeNanoseconds &- lastRenewal.withLock { $0 }
        if since >= lease.nanoseconds {
            return lastRenewalError.withLock { $0 }
                ?? SessionStoreError(.unavailable, "\(location): no answer for \(since / 1_000_000_000) s")
        }
        return lastRenewalError.withLock { $0 }
    }

    /// Extends this node's leases, and reports the sessions it finds claimed by another node (or
    /// all of them, once the database has been out of reach for a whole lease).
    private func renew() {
        let held = claims.withLock { $0 }
        let lost: Set<String>
        if held.isEmpty {
            // Nothing to renew: a check that the database answers, for readiness.
            let logger = self.logger
            do {
                _ = try renewer.run { connection in try connection.run("SELECT 1", logger: logger) }
                if lastRenewalError.withLock({ $0 }) != nil { logger.notice("the database answers again") }
                recordRenewal(failure: nil)
            } catch {
                if lastRenewalError.withLock({ $0 }) == nil {
                    logger.warning("the database does not answer; this node reports itself not ready", metadata: ["error": "\(error)"])
                }
                recordRenewal(failure: error)
            }
            return
        }
        let ids = Array(held.keys)
        let epochs = ids.map { held[$0]! }
        let logger = self.logger
        let lease = self.lease.timeInterval
        do {
            let renewed = try renewer.run { connection -> Set<String> in
                // The rows locked in id order first, as a commit locks them.
                let rows = try connection.run(
                    """
                    WITH held AS (
                        SELECT s.id FROM reactor_sessions AS s
                        JOIN unnest(\(ids)::text[], \(epochs)::bigint[]) AS c(id, epoch) ON s.id = c.id AND s.epoch = c.epoch
                        WHERE s.owner = \(node) ORDER BY s.id FOR UPDATE OF s)
                    UPDATE reactor_sessions AS s SET lease_until = now() + make_interval(secs => \(lease))
                    FROM held WHERE s.id = held.id
                    RETURNING s.id
                    """, logger: logger
                ).rows
                return Set(try rows.map { try $0.decode(String.self) })
            }
            recordRenewal(failure: nil)
            // Those no longer held at the epoch read above: claimed by another node (unless this
            // node claimed, released or deleted them again meanwhile).
            lost = claims.withLock { claims in
                var lost: Set<String> = []
                for (id, epoch) in held where !renewed.contains(id) && claims[id] == epoch {
                    claims[id] = nil
                    lost.insert(id)
                }
                return lost
            }
        } catch {
            recordRenewal(failure: error)
            let since = DispatchTime.now().uptimeNanoseconds &- lastRenewal.withLock { $0 }
            guard since >= self.lease.nanoseconds else {
                logger.warning("could not renew the session leases; retrying", metadata: ["error": "\(error)"])
                return
            }
            logger.error(
                "session leases lapsed: the database was out of reach for a whole lease, so other nodes may serve these sessions now",
                metadata: ["error": "\(error)", "sessions": "\(held.count)"])
            lost = claims.withLock { claims in
                let lost = Set(claims.keys)
                claims.removeAll()
                return lost
            }
        }
        if !lost.isEmpty, let handler = lostHandler.withLock({ $0 }) { handler(lost) }
    }

    /// Records how a renewal (or check) ended: a success moves the last renewal on.
    private func recordRenewal(failure: SessionStoreError?) {
        if failure == nil { lastRenewal.withLock { $0 = DispatchTime.now().uptimeNanoseconds } }
        lastRenewalError.withLock { $0 = failure }
    }
}

/// Runs `renew` every `period` on a thread of its own until stopped.
final class LeaseKeeper: Sendable {
    private let stopping = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)

    init(period: Duration, renew: @escaping @Sendable () -> Void) {
        let seconds = period.timeInterval
        var error: Int32 = 0
        guard
            startDetachedThread(
                named: "rs-leases",
                { [stopping, stopped] in
                    while stopping.wait(timeout: .now() + seconds) == .timedOut { renew() }
                    stopped.signal()
                }, error: &error)
        else {
            fatalError("could not start the lease renewal thread (error \(error))")
        }
    }

    /// Stops renewing; returns once the thread has.
    func stop() {
        stopping.signal()
        stopped.wait()
    }
}
