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
    /// How many versions the log holds (the newest and its history).
    var count: Int { get }
    /// Every version the log holds, oldest first.
    func kept() -> [any VersionedState]
}

/// A fixed-capacity ring of an instance's most recent states, kept by value: publishing a state
/// stores it in the ring and allocates nothing (once the ring has grown to its capacity). The
/// shared `VersionedState` of a version — whose JSON is encoded once, by its first reader — is
/// built when a reader first asks for that version and kept with it, so the states nobody reads
/// (actions POSTed while no stream is open) never become objects.
///
/// Publishing touches as little memory as it can, since with many instances most logs are cold
/// when a state arrives: the ring holds consecutive versions, so it stores no version per state
/// (the newest one and the count place every other), and the shared objects live in a buffer of
/// their own that exists only once something has read the log.
///
/// The states live in a buffer of `State`s rather than in an array of a generic entry type: the
/// service runs this code unspecialised (it is generic over a reactor the service module never
/// sees), and there every use of a type built from `State`, such as `[Entry]`, would look up that
/// type's metadata in the runtime's tables — per access.
///
/// `@unchecked Sendable`: the publisher holds it (through ``StatePublisher``) and the timeline's
/// storage holds it, and both touch it only inside the timeline's lock — `StateTimeline.publish`,
/// `latest`, `current` and `states(after:)` are the only callers, each within `storage.withLock`.
/// The buffers are owned here alone and never handed out. For the same reason the fields are
/// `@exclusivity(unchecked)`: the lock keeps accesses apart, so dynamic checks would only cost time.
final class TypedStateLog<State: Encodable & Sendable>: StateLog, @unchecked Sendable {
    // What publishing uses comes first, next to the object's header.

    /// The newest state's version. The ring holds versions `newestVersion - count + 1` through
    /// `newestVersion`, one per state, oldest at `start`.
    @exclusivity(unchecked) private(set) var newestVersion: UInt64 = 0
    /// How many states the ring holds; the first `count` of `states` are initialised.
    @exclusivity(unchecked) private(set) var count = 1
    @exclusivity(unchecked) private var start = 0
    /// States kept: the history's capacity, and at least the newest state.
    private let capacity: Int
    @exclusivity(unchecked) private var states: UnsafeMutablePointer<State>
    /// The shared object of the state at the same index, once a reader asked for it; `allocated`
    /// entries, all initialised. Nil until the first reader.
    @exclusivity(unchecked) private var shared: UnsafeMutablePointer<(any VersionedState)?>?
    /// How many states `states` has room for (at most `capacity`).
    @exclusivity(unchecked) private var allocated = 1
    /// False with a history capacity of 0: only the newest state is kept, and nothing replays.
    private let keepsHistory: Bool
    /// Looked up once here rather than for every object built.
    private let sharedType = EncodedOnDemand<State>.self

    /// A log holding `initial` as `version` (0 for a new instance).
    init(initial: State, version: UInt64 = 0, historyCapacity: Int) {
        newestVersion = version
        capacity = max(1, historyCapacity)
        keepsHistory = historyCapacity > 0
        // The ring grows as states arrive rather than reserving its capacity up front: most
        // instances publish few states, and 100,000 idle instances should cost little.
        states = .allocate(capacity: 1)
        states.initialize(to: initial)
    }

    deinit {
        // The ring is either not yet wrapped (`0..<count`) or full (every allocated state).
        states.deinitialize(count: count)
        states.deallocate()
        if let shared {
            shared.deinitialize(count: allocated)
            shared.deallocate()
        }
    }

    /// Adds a state newer than the newest, dropping the oldest when the ring is full. A version
    /// that does not follow the newest starts the history again from it (the ring holds only
    /// consecutive versions), so nothing replays across the gap.
    func append(_ state: State, version: UInt64, json: [UInt8]? = nil) {
        if version != newestVersion &+ 1 { clear() }
        if count < capacity {
            // Not yet full, so not yet wrapped: the ring is `0..<count` in order, and the shared
            // object at `count` is nil.
            if count == allocated { grow(to: min(capacity, max(8, count * 2))) }
            (states + count).initialize(to: state)
            count += 1
        } else {
            states[start] = state
            shared?[start] = nil
            start = start + 1 == capacity ? 0 : start + 1
        }
        newestVersion = version
        if let json {
            let index = (start + count - 1) % count
            if shared == nil { shared = makeShared(count: allocated) }
            shared![index] = sharedType.init(version: version, state: state, json: json)
        }
    }

    /// Gives the newest state the JSON it is known by (a state loaded from the store).
    func seed(json: [UInt8]) {
        let index = (start + count - 1) % count
        if shared == nil { shared = makeShared(count: allocated) }
        shared![index] = sharedType.init(version: newestVersion, state: states[index], json: json)
    }

    /// Drops every state, keeping the buffers.
    private func clear() {
        states.deinitialize(count: count)
        shared?.update(repeating: nil, count: allocated)
        count = 0
        start = 0
    }

    private func grow(to newAllocated: Int) {
        let grown = UnsafeMutablePointer<State>.allocate(capacity: newAllocated)
        grown.moveInitialize(from: states, count: count)
        states.deallocate()
        states = grown
        if let old = shared {
            let grownShared = makeShared(count: newAllocated)
            grownShared.moveUpdate(from: old, count: count)
            (old + count).deinitialize(count: allocated - count)
            old.deallocate()
            shared = grownShared
        }
        allocated = newAllocated
    }

    private func makeShared(count: Int) -> UnsafeMutablePointer<(any VersionedState)?> {
        let buffer = UnsafeMutablePointer<(any VersionedState)?>.allocate(capacity: count)
        buffer.initialize(repeating: nil, count: count)
        return buffer
    }

    func newest() -> any VersionedState { sharedState(atOffset: count - 1) }

    func kept() -> [any VersionedState] { (0..<count).map(sharedState(atOffset:)) }

    func states(after version: UInt64) -> [any VersionedState]? {
        guard keepsHistory else { return nil }
        // A version this instance never published: a fresh snapshot.
        guard version <= newestVersion else { return nil }
        if version == newestVersion { return [] }
        // Too old to replay (some version after it was dropped): a fresh snapshot. `version + 1`
        // cannot overflow here, `version` being below the newest.
        let oldest = newestVersion - UInt64(count - 1)
        guard version + 1 >= oldest else { return nil }
        return (Int(version + 1 - oldest)..<count).map(sharedState(atOffset:))
    }

    /// The shared object of the state `offset` places after the oldest, built on first use.
    private func sharedState(atOffset offset: Int) -> any VersionedState {
        let index = (start + offset) % count
        let shared: UnsafeMutablePointer<(any VersionedState)?>
        if let existing = self.shared {
            shared = existing
        } else {
            shared = makeShared(count: allocated)
            self.shared = shared
        }
        if let built = shared[index] { return built }
        let built = sharedType.init(version: newestVersion - UInt64(count - 1 - offset), state: states[index])
        shared[index] = built
        return built
    }
}

/// Publishes an instance's states to its timeline: the typed end of the timeline's log, held by
/// the one publisher (the instance's state observer).
package struct StatePublisher<State: Encodable & Sendable>: Sendable {
    let timeline: StateTimeline
    fileprivate let log: TypedStateLog<State>

    /// Stores `state` and wakes the subscribers, unless `version` is not newer than the newest.
    /// `json`, when given, is the state's encoding, shared by every reader of this version; it is
    /// kept with the state only while the timeline has subscribers. Kept for nobody, a shared
    /// copy per version costs more to make and to drop than encoding again the rare version a
    /// reader asks for later (the encoding is deterministic: the same bytes).
    /// `origin`, when given, is kept for the timeline's ``StateTimeline/history(after:)``.
    /// - Returns: whether the timeline had subscribers, who may be shown the state.
    @discardableResult
    package func publish(_ state: State, version: UInt64, json: [UInt8]? = nil, origin: VersionOrigin? = nil) -> Bool {
        timeline.publish(version: version, origin: origin) { watched in
            log.append(state, version: version, json: watched ? json : nil)
        }
    }
}

extension StateTimeline {
    /// A timeline whose first state is `initial` (version 0), and the publisher of the rest.
    package static func make<State: Encodable & Sendable>(
        initial: State, historyCapacity: Int, subscriberLimit: Int
    ) -> (timeline: StateTimeline, publisher: StatePublisher<State>) {
        make(
            restoring: initial, version: 0, json: nil, history: [], historyCapacity: historyCapacity,
            subscriberLimit: subscriberLimit)
    }

    /// A timeline resuming at `version` with `initial` (whose JSON is `json`), after the stored
    /// `history` (oldest first, ending before `version`), and the publisher of the rest.
    /// `origins` are the stored versions' origins (the action that produced each).
    package static func make<State: Encodable & Sendable>(
        restoring initial: State, version: UInt64, json: [UInt8]?, history: [SessionBatch.Version],
        origins: [VersionOrigin] = [], historyCapacity: Int, subscriberLimit: Int
    ) -> (timeline: StateTimeline, publisher: StatePublisher<State>) {
        let log = TypedStateLog(initial: initial, version: version, historyCapacity: historyCapacity)
        if let json { log.seed(json: json) }
        let restored =
            historyCapacity > 0 ? history.suffix(historyCapacity - 1).map { StoredVersion(version: $0.version, json: $0.state) } : []
        let timeline = StateTimeline(
            log: log, restoredHistory: restored, historyCapacity: historyCapacity,
            subscriberLimit: subscriberLimit, origins: origins)
        return (timeline, StatePublisher(timeline: timeline, log: log))
    }
}
