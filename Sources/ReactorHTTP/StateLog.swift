/// An instance's published states, newest last, as its timeline reads them (always under the
/// timeline's lock).
protocol StateLog: AnyObject {
    /// The newest state's version.
    var newestVersion: UInt64 { get }
    /// The newest state, shared by every reader of that version.
    func newest() -> any VersionedState
    /// The states after `version`, oldest first, when the log still holds every one of them;
    /// nil when some were already dropped, when `version` is newer than the newest, or when the
    /// log keeps no history (the caller sends a fresh snapshot instead).
    func states(after version: UInt64) -> [any VersionedState]?
}

/// A fixed-capacity ring of an instance's most recent states, kept by value: publishing a state
/// stores it in the ring and allocates nothing (once the ring has grown to its capacity). The
/// shared `VersionedState` of a version — whose JSON is encoded once, by its first reader — is
/// built when a reader first asks for that version and kept with it, so the states nobody reads
/// (actions POSTed while no stream is open) never become objects.
///
/// The states live in a buffer of `State`s beside an array of a concrete type, rather than in an
/// array of a generic entry type: the service runs this code unspecialised (it is generic over
/// a reactor the service module never sees), and there every use of a type built from `State`,
/// such as `[Entry]`, would look up that type's metadata in the runtime's tables — per access.
///
/// `@unchecked Sendable`: the publisher holds it (through ``StatePublisher``) and the timeline's
/// storage holds it, and both touch it only inside the timeline's lock — `StateTimeline.publish`,
/// `latest`, `current` and `states(after:)` are the only callers, each within `storage.withLock`.
/// The buffer is owned here alone and never handed out. For the same reason the fields are
/// `@exclusivity(unchecked)`: the lock keeps accesses apart, so dynamic checks would only cost time.
final class TypedStateLog<State: Encodable & Sendable>: StateLog, @unchecked Sendable {
    /// The ring's states; the first `slots.count` are initialised. Oldest at `start`.
    @exclusivity(unchecked) private var states: UnsafeMutablePointer<State>
    /// How many states `states` has room for.
    @exclusivity(unchecked) private var allocated: Int
    /// What goes with the state at the same index.
    @exclusivity(unchecked) private var slots: [StateLogSlot]
    @exclusivity(unchecked) private var start = 0
    /// Entries kept: the history's capacity, and at least the newest state.
    private let capacity: Int
    /// False with a history capacity of 0: only the newest state is kept, and nothing replays.
    private let keepsHistory: Bool
    /// Looked up once here rather than for every object built.
    private let sharedType = EncodedOnDemand<State>.self

    /// A log holding `initial` as version 0.
    init(initial: State, historyCapacity: Int) {
        capacity = max(1, historyCapacity)
        keepsHistory = historyCapacity > 0
        // The ring grows as states arrive rather than reserving its capacity up front: most
        // instances publish few states, and 100,000 idle instances should cost little.
        allocated = 1
        states = .allocate(capacity: 1)
        states.initialize(to: initial)
        slots = [StateLogSlot(version: 0)]
    }

    deinit {
        states.deinitialize(count: slots.count)
        states.deallocate()
    }

    private var newestIndex: Int { (start + slots.count - 1) % slots.count }

    var newestVersion: UInt64 { slots[newestIndex].version }

    /// Adds a state newer than the newest, dropping the oldest when the ring is full.
    func append(_ state: State, version: UInt64) {
        let count = slots.count
        if count < capacity {
            // Not yet full, so not yet wrapped: the ring is `0..<count` in order.
            if count == allocated { grow(to: min(capacity, max(8, count * 2))) }
            (states + count).initialize(to: state)
            slots.append(StateLogSlot(version: version))
        } else {
            states[start] = state
            slots[start] = StateLogSlot(version: version)
            start = (start + 1) % capacity
        }
    }

    private func grow(to newAllocated: Int) {
        let grown = UnsafeMutablePointer<State>.allocate(capacity: newAllocated)
        grown.moveInitialize(from: states, count: slots.count)
        states.deallocate()
        states = grown
        allocated = newAllocated
        slots.reserveCapacity(newAllocated)
    }

    func newest() -> any VersionedState { sharedState(at: newestIndex) }

    func states(after version: UInt64) -> [any VersionedState]? {
        guard keepsHistory else { return nil }
        // A version this instance never published, or too old to replay: a fresh snapshot.
        // (In this order: `version + 1` cannot overflow once `version` is at most the newest.)
        guard version <= newestVersion, version + 1 >= slots[start].version else { return nil }
        var result: [any VersionedState] = []
        for offset in 0..<slots.count {
            let index = (start + offset) % slots.count
            if slots[index].version > version { result.append(sharedState(at: index)) }
        }
        return result
    }

    private func sharedState(at index: Int) -> any VersionedState {
        if let built = slots[index].shared { return built }
        let built = sharedType.init(version: slots[index].version, state: states[index])
        slots[index].shared = built
        return built
    }
}

/// The version and shared object of one state in a ``TypedStateLog``. Not nested in the generic
/// log, so it is a concrete type even where the log runs unspecialised.
struct StateLogSlot {
    let version: UInt64
    /// The state's shared object, once a reader asked for it.
    var shared: (any VersionedState)?
}

/// Publishes an instance's states to its timeline: the typed end of the timeline's log, held by
/// the one publisher (the instance's state observer).
struct StatePublisher<State: Encodable & Sendable>: Sendable {
    let timeline: StateTimeline
    fileprivate let log: TypedStateLog<State>

    /// Stores `state` and wakes the subscribers, unless `version` is not newer than the newest.
    func publish(_ state: State, version: UInt64) {
        timeline.publish(version: version) { log.append(state, version: version) }
    }
}

extension StateTimeline {
    /// A timeline whose first state is `initial` (version 0), and the publisher of the rest.
    static func make<State: Encodable & Sendable>(
        initial: State, historyCapacity: Int, subscriberLimit: Int
    ) -> (timeline: StateTimeline, publisher: StatePublisher<State>) {
        let log = TypedStateLog(initial: initial, historyCapacity: historyCapacity)
        let timeline = StateTimeline(log: log, subscriberLimit: subscriberLimit)
        return (timeline, StatePublisher(timeline: timeline, log: log))
    }
}
