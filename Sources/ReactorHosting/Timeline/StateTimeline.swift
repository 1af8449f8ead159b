import Locking

/// Why an instance's event streams end.
package enum StreamEndReason: String, Sendable {
    /// The session store failed to keep what the instance did; it comes back, as last
    /// committed, on the next request.
    case unavailable
    case deleted
    case expired
    case shutdown
    /// Another node serves the instance now (several nodes share the store): reconnect
    /// through the proxy with `Last-Event-ID` to resume there.
    case moved
}

/// One reader of a timeline (an event stream): woken to pull when a state is published or the
/// timeline ends, and handed already-framed events (mutation errors) to send.
package protocol TimelineSubscriber: AnyObject, Sendable {
    /// Pull the latest state (or the end) soon.
    func wake()
    /// Queue an already-framed event and wake.
    func enqueue(event: [UInt8])
}

/// A reader's answer built from the latest state (the `GET` response), cached on the timeline
/// so that every request for that version shares it.
package protocol LatestSnapshot: AnyObject, Sendable {
    /// The version it was built from.
    var version: UInt64 { get }
}

/// The states an instance has published, as its event streams see them: the latest, a bounded
/// history for `Last-Event-ID` replay, and the subscribers to wake when either changes.
/// A publisher only stores and wakes; each subscriber pulls (and so conflates) at its own pace.
///
/// A value type over one locked allocation, so an instance holds it inline: publishing a state
/// touches one object fewer than a class would (it matters when instances are many and cold).
/// Copies share the same timeline.
package struct StateTimeline: Sendable {
    private struct Storage {
        /// The published states: the latest and the history (see ``TypedStateLog``).
        let log: any StateLog
        /// Versions older than the log's, loaded from the session store, oldest first: the
        /// history before the instance was activated, dropped as the log fills up.
        var restoredHistory: [StoredVersion] = []
        /// Events every subscriber that attaches is sent first (interrupted actions reported at
        /// activation, before any client was connected); bounded.
        var retainedEvents: [[UInt8]] = []
        var subscribers: [any TimelineSubscriber] = []
        /// Where each subscriber sits in `subscribers`, so one leaves in constant time even when
        /// thousands of streams close together.
        var positions: [ObjectIdentifier: Int] = [:]
        var endReason: StreamEndReason?
        /// The `GET` answer for the latest version once a request asked for it. One per instance:
        /// older versions are never asked for again, so theirs are let go.
        var snapshot: (any LatestSnapshot)?
        /// The recent actions and where the recent versions came from (``history(after:)``).
        var provenance: ProvenanceLog
    }

    private let storage: Locked<Storage>
    /// The most event streams one instance may have open at once.
    package let subscriberLimit: Int
    /// How many versions are kept for replay (the log's capacity).
    let historyCapacity: Int

    /// Made with ``make(initial:historyCapacity:subscriberLimit:)``, which also returns the
    /// publisher that adds states to `log`.
    init(
        log: any StateLog, restoredHistory: [StoredVersion] = [], historyCapacity: Int = 0, subscriberLimit: Int,
        origins: [VersionOrigin] = []
    ) {
        var provenance = ProvenanceLog(capacity: historyCapacity)
        for origin in origins { provenance.record(origin) }
        storage = Locked(Storage(log: log, restoredHistory: restoredHistory, provenance: provenance))
        self.subscriberLimit = subscriberLimit
        self.historyCapacity = historyCapacity
    }

    /// The latest state and, once the instance is gone, why its streams end.
    package var current: (latest: any VersionedState, endReason: StreamEndReason?) {
        storage.withLock { ($0.log.newest(), $0.endReason) }
    }

    /// The latest state.
    package var latest: any VersionedState { storage.withLock { $0.log.newest() } }

    /// The snapshot of the latest state, built by `make` (outside the lock) when the latest
    /// version has none yet, and then shared by every request for that version.
    package func latestSnapshot<Snapshot: LatestSnapshot>(_ make: (any VersionedState) -> Snapshot) -> Snapshot {
        let (latest, cached) = storage.withLock { ($0.log.newest(), $0.snapshot as? Snapshot) }
        if let cached, cached.version == latest.version { return cached }
        let built = make(latest)
        return storage.withLock { storage in
            // Another request may have built it meanwhile (share theirs), or a newer one (keep it).
            if let current = storage.snapshot as? Snapshot, current.version >= built.version {
                return current.version == built.version ? current : built
            }
            storage.snapshot = built
            return built
        }
    }

    /// How many event streams are open on this instance.
    package var subscriberCount: Int { storage.withLock { $0.subscribers.count } }

    /// Has `store` add a newly published state to the log (under the lock; told whether the
    /// timeline has subscribers) and wakes every subscriber. Versions that are not newer than the
    /// latest are ignored, so the stream's versions only increase. Called by ``StatePublisher``,
    /// which holds the log's typed end.
    /// - Returns: whether the timeline had subscribers, who may be shown the state.
    @discardableResult
    func publish(version: UInt64, origin: VersionOrigin?, store: (_ watched: Bool) -> Void) -> Bool {
        let subscribers: [any TimelineSubscriber]? = storage.withLock { storage in
            guard version > storage.log.newestVersion, storage.endReason == nil else { return nil }
            store(!storage.subscribers.isEmpty)
            if let origin { storage.provenance.record(origin) }
            if !storage.restoredHistory.isEmpty {
                let capacity = max(0, historyCapacity - storage.log.count)
                storage.restoredHistory.removeFirst(max(0, storage.restoredHistory.count - capacity))
            }
            return storage.subscribers.isEmpty ? nil : storage.subscribers
        }
        subscribers?.forEach { $0.wake() }
        return subscribers != nil
    }

    /// Keeps `action` among the instance's recent actions (see ``history(after:)``).
    package func record(_ action: ActionRecord) {
        storage.withLock { $0.provenance.record(action) }
    }

    /// The kept versions newer than `version` (all of them when nil), each with where it came
    /// from when known, and the recent actions.
    package func history(after version: UInt64?) -> TimelineHistory {
        let (states, origins, actions) = storage.withLock { storage in
            // The restored history goes before the log, even across a gap (versions skipped at
            // activation): a reader that kept versions in between learns they are not the instance's.
            let states: [any VersionedState] = storage.restoredHistory + storage.log.kept()
            return (states, storage.provenance.originsByVersion, storage.provenance.recentActions)
        }
        let newer = version.map { after in states.filter { $0.version > after } } ?? states
        return TimelineHistory(versions: newer.map { ($0, origins[$0.version]) }, actions: actions)
    }

    /// Queues an already-framed event (an `error` event) on every subscriber.
    package func broadcast(event: [UInt8]) {
        let subscribers = storage.withLock { $0.subscribers }
        subscribers.forEach { $0.enqueue(event: event) }
    }

    /// The states after `version` for replay, or nil when the history no longer holds them all.
    package func states(after version: UInt64) -> [any VersionedState]? {
        storage.withLock { storage in
            if let states = storage.log.states(after: version) { return states }
            // Older than the log: the restored history may hold the versions in between.
            // The log holds consecutive versions ending with the newest, so this cannot underflow.
            let oldestLogged = storage.log.newestVersion - UInt64(storage.log.count - 1)
            guard let first = storage.restoredHistory.first, version &+ 1 >= first.version,
                version < oldestLogged,
                storage.restoredHistory.last.map({ $0.version + 1 == oldestLogged }) ?? false,
                let logged = storage.log.states(after: oldestLogged - 1)
            else { return nil }
            let restored: [any VersionedState] = storage.restoredHistory.filter { $0.version > version }
            return restored + logged
        }
    }

    /// Queues an already-framed event on every subscriber now, and on every one that attaches
    /// later (the most recent 32 are kept).
    package func retain(event: [UInt8]) {
        let subscribers = storage.withLock { storage in
            storage.retainedEvents.append(event)
            storage.retainedEvents.removeFirst(max(0, storage.retainedEvents.count - 32))
            return storage.subscribers
        }
        subscribers.forEach { $0.enqueue(event: event) }
    }

    /// Adds a subscriber, unless the instance is gone or at its limit.
    package func attach(_ subscriber: any TimelineSubscriber) throws(HostingError) {
        let outcome: HostingError? = storage.withLock { storage in
            if storage.endReason != nil { return HostingError.instanceEnded }
            if storage.subscribers.count >= subscriberLimit {
                return HostingError.tooManySubscribers(limit: subscriberLimit)
            }
            storage.positions[ObjectIdentifier(subscriber)] = storage.subscribers.count
            storage.subscribers.append(subscriber)
            return nil
        }
        if let outcome { throw outcome }
        for event in storage.withLock({ $0.retainedEvents }) { subscriber.enqueue(event: event) }
    }

    /// Removes a subscriber whose stream has closed.
    package func detach(_ subscriber: any TimelineSubscriber) {
        storage.withLock { storage in
            guard let position = storage.positions.removeValue(forKey: ObjectIdentifier(subscriber)) else { return }
            let last = storage.subscribers.removeLast()
            if position < storage.subscribers.count {
                storage.subscribers[position] = last
                storage.positions[ObjectIdentifier(last)] = position
            }
        }
    }

    /// Whether `subscriber` is among the open streams (a linear scan, for checks and tests).
    package func isAttached(_ subscriber: any TimelineSubscriber) -> Bool {
        storage.withLock { $0.subscribers.contains { $0 === subscriber } }
    }

    /// Ends every stream: subscribers send their last events and an `end` event, then close.
    package func end(_ reason: StreamEndReason) {
        let subscribers: [any TimelineSubscriber] = storage.withLock { storage in
            guard storage.endReason == nil else { return [] }
            storage.endReason = reason
            return storage.subscribers
        }
        subscribers.forEach { $0.wake() }
    }
}
