import Locking
import Synchronization

/// The live instances, by id. Nothing lists them: an instance is reachable only by its id.
///
/// The table is split into shards by id, each with its own lock, so requests for different
/// instances on different threads do not take turns on one lock (ids are random, so instances
/// spread evenly).
package final class InstanceTable: Sendable {
    private typealias Shard = Locked<[InstanceKey: any HostedInstance]>
    private static let shardCount = 64
    private let shards: [Shard]
    /// Live instances plus creations under way, so the limit holds across shards.
    private let reserved = Atomic<Int>(0)
    /// The most instances held at once.
    package let limit: Int

    package init(limit: Int) {
        self.limit = limit
        self.shards = (0..<Self.shardCount).map { _ in Shard([:]) }
    }

    /// How many instances are live.
    package var count: Int { reserved.load(ordering: .relaxed) }

    private func shard(_ key: InstanceKey) -> Shard {
        shards[Int(truncatingIfNeeded: key.middle) & (Self.shardCount - 1)]
    }

    /// Creates an instance with a fresh id, unless the table is full. `isTaken` tells of ids
    /// in use elsewhere (a stored session), which are never given out again.
    package func create(
        isTaken: (String) -> Bool = { _ in false },
        _ make: (String) -> any HostedInstance
    ) throws(HostingError) -> any HostedInstance {
        guard reserved.wrappingAdd(1, ordering: .relaxed).oldValue < limit else {
            reserved.wrappingSubtract(1, ordering: .relaxed)
            throw HostingError.tooManyInstances(limit: limit)
        }
        while true {
            let id = InstanceID.make()
            // `make()` writes 22 characters of the alphabet, which always have a key.
            guard let key = InstanceKey(id), !isTaken(id) else { continue }
            let instance = make(id)
            let stored = shard(key).withLock { instances -> Bool in
                guard instances[key] == nil else { return false }
                instances[key] = instance
                return true
            }
            if stored { return instance }
            // An instance already has these 128 bits: practically never.
            instance.dispose(.deleted)
        }
    }

    /// The instance with this id, if it is live.
    package func instance(_ id: String) -> (any HostedInstance)? {
        guard let key = InstanceKey(id) else { return nil }
        return instance(key: key)
    }

    /// The instance whose id has this key, if it is live.
    package func instance(key: InstanceKey) -> (any HostedInstance)? {
        shard(key).withLock { $0[key] }
    }

    /// The instance under `key`, or the one `make` builds, stored there, when there is none
    /// (then counted against the limit).
    package func insertIfAbsent(
        key: InstanceKey,
        _ make: () throws(HostingError) -> any HostedInstance
    ) throws(HostingError) -> any HostedInstance {
        if let live = instance(key: key) { return live }
        guard reserved.wrappingAdd(1, ordering: .relaxed).oldValue < limit else {
            reserved.wrappingSubtract(1, ordering: .relaxed)
            throw HostingError.tooManyInstances(limit: limit)
        }
        let made: any HostedInstance
        do {
            made = try make()
        } catch {
            reserved.wrappingSubtract(1, ordering: .relaxed)
            throw error
        }
        let existing = shard(key).withLock { instances -> (any HostedInstance)? in
            if let existing = instances[key] { return existing }
            instances[key] = made
            return nil
        }
        if let existing {
            reserved.wrappingSubtract(1, ordering: .relaxed)
            return existing
        }
        return made
    }

    /// The ids of the instances in memory.
    package func ids() -> Set<String> {
        var ids: Set<String> = []
        for shard in shards {
            shard.withLock { instances in
                for instance in instances.values { ids.insert(instance.id) }
            }
        }
        return ids
    }

    /// Removes and returns the instance with this id.
    package func remove(_ id: String) -> (any HostedInstance)? {
        guard let key = InstanceKey(id) else { return nil }
        let removed = shard(key).withLock { $0.removeValue(forKey: key) }
        if removed != nil { reserved.wrappingSubtract(1, ordering: .relaxed) }
        return removed
    }

    /// Removes and returns the instances idle since before `cutoff` with no open event stream.
    package func removeIdle(before cutoff: UInt64) -> [any HostedInstance] {
        var idle: [any HostedInstance] = []
        for shard in shards {
            shard.withLock { instances in
                let keys = instances.compactMap { key, instance in
                    instance.lastActivity < cutoff && instance.timeline.subscriberCount == 0 ? key : nil
                }
                for key in keys {
                    if let instance = instances.removeValue(forKey: key) { idle.append(instance) }
                }
            }
        }
        reserved.wrappingSubtract(idle.count, ordering: .relaxed)
        return idle
    }

    /// The instances idle since before `cutoff` with no open event stream that satisfy
    /// `condition`, left in the table.
    package func idle(before cutoff: UInt64, where condition: (any HostedInstance) -> Bool) -> [any HostedInstance] {
        var idle: [any HostedInstance] = []
        for shard in shards {
            shard.withLock { instances in
                for instance in instances.values
                where instance.lastActivity < cutoff && instance.timeline.subscriberCount == 0 && condition(instance) {
                    idle.append(instance)
                }
            }
        }
        return idle
    }

    /// Removes `instance` if it is still the one under its id and still idle since before
    /// `cutoff` with no open event stream and `condition` holding; returns whether it did.
    package func removeIfIdle(
        _ instance: any HostedInstance, before cutoff: UInt64,
        where condition: (any HostedInstance) -> Bool
    ) -> Bool {
        guard let key = InstanceKey(instance.id) else { return false }
        let removed = shard(key).withLock { instances -> Bool in
            guard let current = instances[key], current === instance, current.lastActivity < cutoff,
                current.timeline.subscriberCount == 0, condition(current)
            else { return false }
            instances[key] = nil
            return true
        }
        if removed { reserved.wrappingSubtract(1, ordering: .relaxed) }
        return removed
    }

    /// Removes and returns every instance.
    package func removeAll() -> [any HostedInstance] {
        var all: [any HostedInstance] = []
        for shard in shards {
            shard.withLock { instances in
                all.append(contentsOf: instances.values)
                instances.removeAll()
            }
        }
        reserved.wrappingSubtract(all.count, ordering: .relaxed)
        return all
    }
}
