import Locking

/// Why an instance's event streams end.
enum StreamEndReason: String, Sendable {
    case deleted
    case expired
    case shutdown
}

/// The states an instance has published, as its event streams see them: the latest, a bounded
/// history for `Last-Event-ID` replay, and the subscribers to wake when either changes.
/// A publisher only stores and wakes; each subscriber pulls (and so conflates) at its own pace.
///
/// A value type over one locked allocation, so an instance holds it inline: publishing a state
/// touches one object fewer than a class would (it matters when instances are many and cold).
/// Copies share the same timeline.
struct StateTimeline: Sendable {
    private struct Storage {
        /// The published states: the latest and the history (see ``TypedStateLog``).
        let log: any StateLog
        var subscribers: [EventSubscriber] = []
        /// Where each subscriber sits in `subscribers`, so one leaves in constant time even when
        /// thousands of streams close together.
        var positions: [ObjectIdentifier: Int] = [:]
        var endReason: StreamEndReason?
        /// The `GET` answer for the latest version once a request asked for it. One per instance:
        /// older versions are never asked for again, so theirs are let go.
        var snapshot: InstanceSnapshot?
    }

    private let storage: Locked<Storage>
    /// The most event streams one instance may have open at once.
    let subscriberLimit: Int

    /// Made with ``make(initial:historyCapacity:subscriberLimit:)``, which also returns the
    /// publisher that adds states to `log`.
    init(log: any StateLog, subscriberLimit: Int) {
        storage = Locked(Storage(log: log))
        self.subscriberLimit = subscriberLimit
    }

    /// The latest state and, once the instance is gone, why its streams end.
    var current: (latest: any VersionedState, endReason: StreamEndReason?) {
        storage.withLock { ($0.log.newest(), $0.endReason) }
    }

    /// The latest state.
    var latest: any VersionedState { storage.withLock { $0.log.newest() } }

    /// The snapshot of the latest state, built by `make` (outside the lock) when the latest
    /// version has none yet, and then shared by every request for that version.
    func latestSnapshot(_ make: (any VersionedState) -> InstanceSnapshot) -> InstanceSnapshot {
        let (latest, cached) = storage.withLock { ($0.log.newest(), $0.snapshot) }
        if let cached, cached.version == latest.version { return cached }
        let built = make(latest)
        return storage.withLock { storage in
            // Another request may have built it meanwhile (share theirs), or a newer one (keep it).
            if let current = storage.snapshot, current.version >= built.version {
                return current.version == built.version ? current : built
            }
            storage.snapshot = built
            return built
        }
    }

    /// How many event streams are open on this instance.
    var subscriberCount: Int { storage.withLock { $0.subscribers.count } }

    /// Has `store` add a newly published state to the log (under the lock) and wakes every
    /// subscriber. Versions that are not newer than the latest are ignored, so the stream's
    /// versions only increase. Called by ``StatePublisher``, which holds the log's typed end.
    func publish(version: UInt64, store: () -> Void) {
        let subscribers: [EventSubscriber]? = storage.withLock { storage in
            guard version > storage.log.newestVersion, storage.endReason == nil else { return nil }
            store()
            return storage.subscribers.isEmpty ? nil : storage.subscribers
        }
        subscribers?.forEach { $0.wake() }
    }

    /// Queues an already-framed event (an `error` event) on every subscriber.
    func broadcast(event: [UInt8]) {
        let subscribers = storage.withLock { $0.subscribers }
        subscribers.forEach { $0.enqueue(event: event) }
    }

    /// The states after `version` for replay, or nil when the history no longer holds them all.
    func states(after version: UInt64) -> [any VersionedState]? {
        storage.withLock { $0.log.states(after: version) }
    }

    /// Adds a subscriber, unless the instance is gone or at its limit.
    func attach(_ subscriber: EventSubscriber) throws(Problem) {
        let outcome: Problem? = storage.withLock { storage in
            if storage.endReason != nil { return Problem.notFound("the instance has ended") }
            if storage.subscribers.count >= subscriberLimit {
                return Problem.tooManyStreams(limit: subscriberLimit, perInstance: true)
            }
            storage.positions[ObjectIdentifier(subscriber)] = storage.subscribers.count
            storage.subscribers.append(subscriber)
            return nil
        }
        if let outcome { throw outcome }
    }

    /// Removes a subscriber whose stream has closed.
    func detach(_ subscriber: EventSubscriber) {
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
    func isAttached(_ subscriber: EventSubscriber) -> Bool {
        storage.withLock { $0.subscribers.contains { $0 === subscriber } }
    }

    /// Ends every stream: subscribers send their last events and an `end` event, then close.
    func end(_ reason: StreamEndReason) {
        let subscribers: [EventSubscriber] = storage.withLock { storage in
            guard storage.endReason == nil else { return [] }
            storage.endReason = reason
            return storage.subscribers
        }
        subscribers.forEach { $0.wake() }
    }
}
