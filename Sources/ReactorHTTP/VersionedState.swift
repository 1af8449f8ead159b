import Locking

/// One published state of an instance with its version, encoded to JSON lazily — at most once,
/// by whichever subscriber or request needs it first — and then shared by all of them.
protocol VersionedState: AnyObject, Sendable {
    /// The state's version on its instance's stream: 0 for the initial state, then +1 per state.
    var version: UInt64 { get }
    /// The state as sorted-key JSON.
    var json: [UInt8] { get }
    /// The state framed as one server-sent event (`id:`, `event: state`, `data:`), built once
    /// and shared by every subscriber that sends it.
    var event: [UInt8] { get }
}

/// A `VersionedState` over a concrete state type.
final class EncodedOnDemand<State: Encodable & Sendable>: VersionedState {
    let version: UInt64
    private let state: State
    private let encoded = Locked<[UInt8]?>(nil)
    private let framed = Locked<[UInt8]?>(nil)

    init(version: UInt64, state: State) {
        self.version = version
        self.state = state
    }

    var json: [UInt8] {
        if let bytes = encoded.withLock({ $0 }) { return bytes }
        // Encoding runs outside the lock; two racing first readers may both encode, and the
        // first to store wins, so every reader sees the same bytes.
        let bytes = JSONCoding.encodeState(state)
        return encoded.withLock { stored in
            if let stored { return stored }
            stored = bytes
            return bytes
        }
    }

    var event: [UInt8] {
        if let bytes = framed.withLock({ $0 }) { return bytes }
        let json = self.json
        var bytes = Array("id: \(version)\nevent: state\ndata: ".utf8)
        bytes.reserveCapacity(bytes.count + json.count + 2)
        bytes.append(contentsOf: json)
        bytes.append(contentsOf: [0x0A, 0x0A])
        return framed.withLock { stored in
            if let stored { return stored }
            stored = bytes
            return bytes
        }
    }
}

/// A fixed-capacity ring of the most recent states, for `Last-Event-ID` replay.
struct StateHistory {
    private var ring: [any VersionedState] = []
    private var start = 0
    let capacity: Int

    init(capacity: Int) {
        // The ring grows as states arrive rather than reserving its capacity up front: most
        // instances publish few states, and 100,000 idle instances should cost little.
        self.capacity = max(0, capacity)
    }

    mutating func append(_ state: any VersionedState) {
        guard capacity > 0 else { return }
        if ring.count < capacity {
            ring.append(state)
        } else {
            ring[start] = state
            start = (start + 1) % capacity
        }
    }

    /// The states after `version`, oldest first, when the history still holds every one of
    /// them; nil when some were already dropped (the caller sends a fresh snapshot instead).
    func states(after version: UInt64) -> [any VersionedState]? {
        guard let oldest = ring.isEmpty ? nil : ring[start] else { return nil }
        let newest = ring[(start + ring.count - 1) % ring.count]
        // Too old to replay, or a version this instance never published: a fresh snapshot.
        guard version + 1 >= oldest.version, version <= newest.version else { return nil }
        var result: [any VersionedState] = []
        for offset in 0..<ring.count {
            let state = ring[(start + offset) % ring.count]
            if state.version > version { result.append(state) }
        }
        return result
    }
}
