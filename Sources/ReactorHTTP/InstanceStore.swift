import Locking

/// The live instances, by id. Nothing lists them: an instance is reachable only by its id.
final class InstanceStore: Sendable {
    private let instances = Locked<[String: any HostedInstance]>([:])
    /// The most instances held at once.
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// How many instances are live.
    var count: Int { instances.withLock { $0.count } }

    /// Creates an instance with a fresh id, unless the store is full.
    func create(_ make: (String) -> any HostedInstance) throws(Problem) -> any HostedInstance {
        guard count < limit else { throw Problem.tooManyInstances(limit: limit) }
        var id = InstanceID.make()
        while instances.withLock({ $0[id] != nil }) { id = InstanceID.make() }
        let instance = make(id)
        let accepted = instances.withLock { instances -> Bool in
            guard instances.count < limit else { return false }
            instances[id] = instance
            return true
        }
        guard accepted else {
            instance.dispose(.deleted)
            throw Problem.tooManyInstances(limit: limit)
        }
        return instance
    }

    /// The instance with this id, if it is live.
    func instance(_ id: String) -> (any HostedInstance)? {
        instances.withLock { $0[id] }
    }

    /// Removes and returns the instance with this id.
    func remove(_ id: String) -> (any HostedInstance)? {
        instances.withLock { $0.removeValue(forKey: id) }
    }

    /// Removes and returns the instances idle since before `cutoff` with no open event stream.
    func removeIdle(before cutoff: UInt64) -> [any HostedInstance] {
        instances.withLock { instances in
            let idle = instances.values.filter { $0.lastActivity < cutoff && $0.timeline.subscriberCount == 0 }
            for instance in idle { instances.removeValue(forKey: instance.id) }
            return idle
        }
    }

    /// Removes and returns every instance.
    func removeAll() -> [any HostedInstance] {
        instances.withLock { instances in
            defer { instances.removeAll() }
            return Array(instances.values)
        }
    }
}
