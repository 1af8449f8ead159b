import Dispatch
import Foundation
import Locking
import Logging
import ReactorCore
import Synchronization
import Tracing

/// How a ``ReactorHost`` keeps its instances: limits, history, threads and the session store.
package struct HostingConfiguration: Sendable {
    /// The most instances in memory at once.
    package var maxInstances = 100_000
    /// Versions each instance keeps for `Last-Event-ID` replay.
    package var historyCapacity = 256
    /// The most subscribers (event streams) on one instance.
    package var subscriberLimit = 10_000
    /// An instance untouched this long with no subscriber is deleted (from the store too).
    package var idleTimeout: Duration = .seconds(30 * 60)
    /// With a store: an instance untouched this long with no subscriber and no action in flight
    /// leaves memory, to be activated from the store by its next request.
    package var passivateAfter: Duration = .seconds(60)
    /// Threads applying actions; 0 applies them on the sending thread.
    package var reactorThreads = 0
    /// How long user code may run before its instance counts as stalled.
    package var stallTimeout: Duration = .seconds(1)
    /// With reactor threads: when an instance has this many actions taken and not yet applied,
    /// a new action's acknowledgement waits until it is applied, so a reactor that cannot keep
    /// up slows its senders down instead of queueing without end.
    package var actionBacklogLimit: UInt64 = 1_024
    /// Where sessions are kept; `nil`: in memory only, lost with the process.
    package var store: (any SessionStore)?
    /// When a write to the store counts as done.
    package var durability: Durability = .sync
    /// Monotonic nanoseconds, for idle expiry and passivation.
    package var now: @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }
    /// Milliseconds since 1970, kept as a session's last activity.
    package var wallClock: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }
    /// Traces each action with this tracer (see ``ActionTraces``); nil: nothing is traced.
    package var tracer: (any Tracer)?
    /// Told of commits, activations and passivations, for metrics.
    package var storeObserver = StoreObserver()
    /// The most sessions one subject (a creation's ``CreationContext/subject``) may hold; nil:
    /// no limit.
    package var maxInstancesPerSubject: Int?
    /// The longest ``ReactorHost/shutdown()`` waits for actions in flight to settle before it
    /// cuts them off (each then goes to its reactor's recovery hook when its session is next
    /// brought back).
    package var stopGrace: Duration = .seconds(5)

    package init() {}
}

/// Many reactor instances: creates them, finds them by id (activating a stored one on its first
/// request), passivates, expires and deletes them, and writes them through to the session store.
/// Knows nothing of HTTP.
package final class ReactorHost: Sendable {
    package let configuration: HostingConfiguration
    package let registry: ReactorRegistry
    package let table: InstanceTable
    /// The threads applying every instance's actions; `nil` when the senders apply them.
    package let drainPool: DrainPool?
    package let committer: GroupCommitter?
    let context: InstanceContext
    let logger: Logger
    /// Each subject's sessions, under ``HostingConfiguration/maxInstancesPerSubject``.
    private let quota: SubjectQuota?
    /// Set once the host hands its instances to other nodes: it activates and creates no more.
    let handingOff = Atomic<Bool>(false)

    /// Whether the host is handing its instances to other nodes (it is stopping).
    package var isHandingOff: Bool { handingOff.load(ordering: .relaxed) }

    /// Why the host should not be sent new work now, in words; nil when it can take it. Not
    /// ready: for a second after a commit failed (a full disk, a database gone), while a shared
    /// store has not answered its last check, and while handing its instances over.
    package var unreadiness: String? {
        if isHandingOff { return "this node is handing its instances over to other nodes before it stops" }
        if committer?.lastError != nil { return "the session store failed its last commit (the server's log says why)" }
        if configuration.store?.outage != nil { return "the session store does not answer (the server's log says why)" }
        return nil
    }

    /// The ids of instances being handed over to another node, which this host does not take
    /// back meanwhile.
    let leaving = Locked<Set<String>>([])
    /// The activations under way, by id: later requests for the id wait for them.
    private let activations = Locked<[InstanceKey: DispatchGroup]>([:])
    /// Ids whose instance was deleted or expired and whose deletion the store has not yet
    /// committed: not brought back from the store meanwhile, which still has them.
    private let deleting = Locked<Set<String>>([])
    /// When this host started, on the wall clock (milliseconds since 1970).
    private let startedAt: Int64

    /// - Parameters:
    ///   - errorEvent: frames a mutation error for the instance's streams.
    ///   - stallChanged, mutationFailed: told of stalls and mutation errors (for metrics).
    package init(
        registry: ReactorRegistry, configuration: HostingConfiguration, logger: Logger,
        errorEvent: @escaping @Sendable (MutationFailure) -> [UInt8],
        stallChanged: @escaping @Sendable (Bool) -> Void = { _ in },
        mutationFailed: @escaping @Sendable () -> Void = {}
    ) {
        self.registry = registry
        self.configuration = configuration
        self.logger = logger
        self.startedAt = configuration.wallClock()
        self.quota = configuration.maxInstancesPerSubject.map(SubjectQuota.init(limit:))
        self.table = InstanceTable(limit: configuration.maxInstances)
        self.drainPool =
            configuration.reactorThreads > 0
            ? DrainPool(size: configuration.reactorThreads, stallTimeout: configuration.stallTimeout) : nil
        let table = self.table
        self.committer = configuration.store.map {
            GroupCommitter(
                store: $0, durability: configuration.durability, logger: logger, observer: configuration.storeObserver,
                staleWriters: { stale in
                    // Another writer (another node) holds them now: serve them no more here.
                    logger.warning("session store refused stale writes; those instances moved", metadata: ["instances": "\(stale.count)"])
                    for id in stale { table.remove(id)?.dispose(.moved) }
                },
                failedInstances: { ids in
                    // Memory must not run ahead of the store: these come back as last committed.
                    for id in ids { table.remove(id)?.dispose(.unavailable) }
                })
        }
        self.context = InstanceContext(
            now: configuration.now, wallClock: configuration.wallClock,
            historyCapacity: configuration.historyCapacity, subscriberLimit: configuration.subscriberLimit,
            logger: logger, drainPool: drainPool, stallTimeout: configuration.stallTimeout,
            actionBacklogLimit: configuration.actionBacklogLimit, committer: committer,
            stallChanged: stallChanged, errorEvent: errorEvent, mutationFailed: mutationFailed,
            tracer: configuration.tracer, restoredAction: configuration.storeObserver.restoredAction)
        configuration.store?.onOwnershipLost { [logger] lost in
            var moved = 0
            for id in lost {
                if let instance = table.remove(id) {
                    instance.dispose(.moved)
                    moved += 1
                }
            }
            if moved > 0 { logger.notice("instances claimed by another node left memory", metadata: ["instances": "\(moved)"]) }
        }
        configuration.store?.onHandOverRequested { [weak self] id in self?.handOver(id: id) }
    }

    /// Creates an instance of `type`, made with `creation` (its parameters and context; throws
    /// ``HostingError/invalidParameters(_:)`` when they make no reactor, creating nothing). With a
    /// store in ``Durability/sync`` the ticket tells when its creation is committed.
    package func create(_ type: RegisteredType, creation: InstanceCreation = InstanceCreation())
        throws(HostingError) -> (any HostedInstance, CommitTicket?)
    {
        if let error = committer?.lastError { throw HostingError(error) }
        if isHandingOff { throw HostingError.ownedElsewhere(retryAfterSeconds: 1) }
        let context = self.context
        let host = try type.prepare(creation)
        let subject = quota == nil ? nil : creation.context.subject
        if let quota, let subject { try quota.admit(subject, store: configuration.store) }
        let instance: any HostedInstance
        do {
            instance = try table.create(isTaken: { id in self.isStored(id) }) { id in host(id, context) }
        } catch {
            if let subject { quota?.release(subject) }
            throw error
        }
        guard let committer else { return (instance, nil) }
        let isShared = configuration.store?.isShared == true
        // Served here from its creation: with async durability, marked as showing versions ahead
        // of the store from the start (a shared store's is marked by the node that claims it).
        let write = SessionWrite.create(
            id: instance.id, type: type.name, state: instance.timeline.latest.json,
            lastActivity: configuration.wallClock(),
            publishingAhead: committer.publishesAhead && !isShared,
            creation: creation == InstanceCreation() ? nil : creation.json)
        guard isShared else { return (instance, counted(committer.enqueueAcknowledged(write), subject, committer)) }
        // With several nodes, the one the proxy routes the id to claims the new session on its
        // first request: stored unclaimed, it stays in no node's memory until then. Nobody knows
        // the id before the answer, so nothing can have reached the instance; the answer waits
        // for the commit in either durability, so the session is there when its id is used.
        table.remove(instance.id)?.dispose(nil)
        return (instance, counted(committer.enqueueAcknowledged(write, inAnyDurability: true), subject, committer))
    }

    /// Counts a new session of `subject` here until the store counts it: until its commit
    /// (`ticket`, before the answer waiting for it), or, answered at once, the commit after.
    private func counted(_ ticket: CommitTicket?, _ subject: String?, _ committer: GroupCommitter) -> CommitTicket? {
        guard let subject, let quota else { return ticket }
        if let ticket {
            ticket.whenCommitted { _ in quota.release(subject) }
        } else {
            committer.afterCommit { quota.release(subject) }
        }
        return ticket
    }

    /// The instance with this id: in memory, or activated from the store. `nil` when there is none.
    /// - Parameter toDelete: the caller deletes a stored session that does not decode, so the
    ///   claim its loading took is kept for that (see ``delete(id:)``).
    package func instance(id: String, toDelete: Bool = false) throws(HostingError) -> (any HostedInstance)? {
        guard let key = InstanceKey(id) else { return nil }
        return try instance(key: key, id: id, toDelete: toDelete)
    }

    /// The instance whose id has this key (`id` spells it): in memory, or activated from the store.
    package func instance(
        key: InstanceKey, id: @autoclosure () -> String,
        toDelete: Bool = false
    ) throws(HostingError) -> (any HostedInstance)? {
        if let live = table.instance(key: key) { return live }
        guard configuration.store != nil else { return nil }
        // Leaving: another node is to claim it.
        if isHandingOff { throw HostingError.ownedElsewhere(retryAfterSeconds: 1) }
        let id = id()
        if leaving.withLock({ $0.contains(id) }) { throw HostingError.ownedElsewhere(retryAfterSeconds: 1) }
        if deleting.withLock({ $0.contains(id) }) { return nil }
        // One activation of an id at a time: a second one would replay its acknowledged actions
        // a second time before it found the first in the table. Requests arriving meanwhile
        // wait for it, then take what it activated (or try again themselves).
        let (activation, leads) = activations.withLock { activations -> (DispatchGroup, Bool) in
            if let running = activations[key] { return (running, false) }
            let started = DispatchGroup()
            started.enter()
            activations[key] = started
            return (started, true)
        }
        guard leads else {
            activation.wait()
            return try instance(key: key, id: id, toDelete: toDelete)
        }
        defer {
            activations.withLock { $0[key] = nil }
            activation.leave()
        }
        // Activated by the one before, which ended just before this one began.
        if let live = table.instance(key: key) { return live }
        return try activate(key: key, id: id, toDelete: toDelete)
    }

    /// Loads the session with this id from the store and puts its instance in the table.
    private func activate(key: InstanceKey, id: String, toDelete: Bool) throws(HostingError) -> (any HostedInstance)? {
        guard let store = configuration.store else { return nil }
        let started = DispatchTime.now().uptimeNanoseconds
        let stored: StoredSession?
        do {
            stored = try store.load(id: id)
        } catch {
            if error.kind == .corrupt {
                configuration.storeObserver.damaged()
                logger.critical(
                    "the session store is damaged: a stored session could not be read, and is not served; stop the server and restore the store from a backup",
                    metadata: ["instance": "\(InstanceID.logLabel(id))", "error": "\(error.message)"])
            }
            throw HostingError(error)
        }
        guard let stored else { return nil }
        let context = self.context
        var activated: (any HostedInstance)?
        let instance: any HostedInstance
        do throws(HostingError) {
            guard let type = registry.type(named: stored.type) else {
                throw HostingError.storedSessionIncompatible("its type '\(stored.type)' is not registered by this build")
            }
            instance = try table.insertIfAbsent(key: key) { () throws(HostingError) in
                let made = try type.restore(id, context, stored)
                activated = made
                return made
            }
        } catch {
            if case .storedSessionIncompatible(let detail) = error {
                configuration.storeObserver.incompatible()
                logger.error(
                    "a stored session no longer decodes as its type; it is kept unchanged and not served",
                    metadata: ["instance": "\(InstanceID.logLabel(id))", "type": "\(stored.type)", "error": "\(detail)"])
                // Loading it claimed it (a shared store): let it go at once, so that a node whose
                // build does decode it (the next one of a rolling deploy) need not wait out the
                // lease; unless it is to be deleted, which takes the claim.
                if !toDelete { committer?.enqueue(.release(id: id)) }
            }
            throw error
        }
        if let activated, activated !== instance {
            activated.dispose(nil)  // not expected: activations of an id take turns
        } else if instance.wasDroppedByFailedCommit {
            // What it ran again as it resumed could not be committed, before the table held it
            // for the failure to take it out: memory never runs ahead of the store.
            table.remove(id)?.dispose(.unavailable)
            throw HostingError.storeUnavailable("the store could not commit what the session ran again as it was brought back")
        } else if deleting.withLock({ $0.contains(id) }) {
            // Deleted while it loaded: the store had it still, and is about to drop it. Memory
            // never keeps what the store no longer has (see `deleteStored`).
            table.remove(id)?.dispose(.deleted)
            return nil
        } else {
            configuration.storeObserver.activated(DispatchTime.now().uptimeNanoseconds &- started)
            logger.debug("instance activated", metadata: ["instance": "\(InstanceID.logLabel(id))"])
        }
        return instance
    }

    /// Deletes the instance with this id, in memory and in the store. Nil when there is none, or
    /// when `mayDelete` refuses its owner; else the ticket (with ``Durability/sync``) tells when
    /// the deletion is committed.
    /// - Parameters:
    ///   - mayDelete: whether an instance with this owner (its ``HostedInstance/owner``) may be
    ///     deleted by the caller.
    ///   - mayDeleteUnread: whether a stored session that does not decode (whose owner is not
    ///     known) may be deleted by the caller.
    package func delete(
        id: String, mayDelete: (_ owner: String?) -> Bool = { _ in true }, mayDeleteUnread: Bool = true
    ) throws(HostingError) -> CommitTicket?? {
        let found: (any HostedInstance)?
        do {
            found = try instance(id: id, toDelete: true)
        } catch {
            guard case .storedSessionIncompatible = error, mayDeleteUnread, let committer else { throw error }
            // Stored but not servable by this build: its owner may still delete it, and nothing
            // of it is in memory.
            return .some(committer.enqueueAcknowledged(.delete(id: id)))
        }
        guard let instance = found, mayDelete(instance.owner), let removed = table.remove(instance.id) else { return .none }
        removed.dispose(.deleted)
        guard let committer else {
            if let owner = removed.owner { quota?.release(owner) }
            return .some(nil)
        }
        var ticket: CommitTicket?
        deleteStored([id], reason: .deleted, by: committer) { ticket = committer.enqueueAcknowledged(.delete(id: $0)) }
        return .some(ticket)
    }

    /// Queues the deletion of the stored sessions of `ids`, whose instances just left memory, and
    /// keeps them from being brought back from the store until it is committed (or has failed):
    /// a request in between would find the session there still, and its instance would outlive
    /// the session. One brought back already, between leaving memory and now, is disposed of
    /// with `reason`; one whose activation is still under way sees `deleting` once it has put its
    /// instance in the table (both check the other's lock after taking their own step).
    /// `queueDeletion` queues each id's `.delete` with `committer`, as its caller needs it (with a
    /// ticket or without).
    private func deleteStored(
        _ ids: [String], reason: StreamEndReason, by committer: GroupCommitter, queueDeletion: (String) -> Void
    ) {
        deleting.withLock { $0.formUnion(ids) }
        for id in ids {
            table.remove(id)?.dispose(reason)
            queueDeletion(id)
        }
        let deleting = self.deleting
        committer.afterCommit { deleting.withLock { $0.subtract(ids) } }
    }

    /// Deletes instances idle past the idle timeout with no subscriber (and, with a store,
    /// stored sessions idle that long). Returns the instances expired from memory.
    @discardableResult
    package func expireIdle() -> [any HostedInstance] {
        let cutoff = cutoff(configuration.idleTimeout)
        let expired = table.removeIdle(before: cutoff)
        for instance in expired {
            instance.dispose(.expired)
            if committer == nil, let owner = instance.owner { quota?.release(owner) }
        }
        if let committer, !expired.isEmpty {
            deleteStored(expired.map(\.id), reason: .expired, by: committer) { committer.enqueue(.delete(id: $0)) }
        }
        return expired
    }

    /// Deletes stored sessions idle past the idle timeout that are not in memory.
    ///
    /// Time the service was down is nobody's idleness: a session is idle since its last activity
    /// or since this host started, whichever is later. So nothing stored expires until the host
    /// has run for the idle timeout, and a restart after a long outage finds every session its
    /// clients left there.
    /// - Returns: how many were deleted.
    @discardableResult
    package func expireStoredSessions() -> Int {
        guard let store = configuration.store else { return 0 }
        let idleMilliseconds = Int64(clamping: configuration.idleTimeout.nanoseconds / 1_000_000)
        let now = configuration.wallClock()
        guard now - startedAt >= idleMilliseconds else { return 0 }
        let deleted: [String]
        do {
            deleted = try store.deleteIdle(before: now - idleMilliseconds, excluding: table.ids())
        } catch {
            logger.error("could not expire stored sessions", metadata: ["error": "\(error)"])
            return 0
        }
        // One brought into memory by a request while the store was deleting it expired at that
        // moment too: memory never keeps what the store no longer has.
        for id in deleted { table.remove(id)?.dispose(.expired) }
        return deleted.count
    }

    /// Counts the stored sessions and measures the store on disk, and tells the store observer
    /// (for the metrics); a store that cannot be read is logged and left uncounted.
    package func countStoredSessions() {
        guard let store = configuration.store else { return }
        do {
            configuration.storeObserver.counted(try store.count())
            if let bytes = try store.diskUsage() { configuration.storeObserver.measured(bytes) }
        } catch {
            logger.error("could not count the stored sessions", metadata: ["error": "\(error)"])
        }
    }

    /// With a store, takes out of memory the instances idle past the passivation time with no
    /// subscriber and no action in flight; they come back on their next request.
    /// - Returns: how many left memory.
    @discardableResult
    package func passivateIdle() -> Int {
        guard let committer else { return 0 }
        let cutoff = cutoff(configuration.passivateAfter)
        let idle = table.idle(before: cutoff) { !$0.isBusy }
        if idle.isEmpty { return 0 }
        let wallClock = configuration.wallClock()
        let now = configuration.now()
        for instance in idle {
            let idleFor = Int64(clamping: (now &- instance.lastActivity) / 1_000_000)
            committer.enqueue(.touch(id: instance.id, lastActivity: wallClock - idleFor))
        }
        // Out of memory only once the store holds everything they did (with async durability,
        // writes may still be queued), and only if nothing touched them meanwhile.
        let table = self.table
        let observer = configuration.storeObserver
        committer.afterCommit {
            for instance in idle where table.removeIfIdle(instance, before: cutoff, where: { !$0.isBusy }) {
                instance.dispose(nil)
                committer.enqueue(.release(id: instance.id))
                observer.passivated()
            }
        }
        return idle.count
    }

    private func isStored(_ id: String) -> Bool {
        guard let store = configuration.store else { return false }
        // If the store cannot tell, a collision of 128 random bits is not worth refusing for.
        return (try? store.contains(id: id)) ?? false
    }

    private func cutoff(_ age: Duration) -> UInt64 {
        let now = configuration.now()
        let nanoseconds = age.nanoseconds
        return now > nanoseconds ? now - nanoseconds : 0
    }
}
