/// An action an instance accepted, as its history shows it.
package struct ActionRecord: Sendable, Equatable {
    /// The action's sequence number on its instance.
    package let seq: UInt64
    /// The action's JSON as it was sent; nil for actions no request sent (merged in by a
    /// transform).
    package let json: [UInt8]?
    /// Milliseconds since 1970 when the instance accepted it.
    package let acceptedAt: Int64
}

/// Where a published version came from.
package struct VersionOrigin: Sendable, Equatable {
    package let version: UInt64
    /// The sequence of the action whose mutation produced it; 0 when no action did (a global
    /// stream, a recovery hook).
    package let producedBy: UInt64
    /// Milliseconds since 1970 when it was published; nil when not known (a version brought back
    /// from the store).
    package let publishedAt: Int64?
}

/// The kept versions of an instance with where each came from, and its recent actions: what an
/// inspector shows of its past.
package struct TimelineHistory: Sendable {
    /// The kept versions, oldest first, each with its origin when known.
    package let versions: [(state: any VersionedState, origin: VersionOrigin?)]
    /// The recently accepted actions, oldest first.
    package let actions: [ActionRecord]
}

/// A ring of at most `capacity` elements, oldest first; appending to a full ring drops the oldest.
/// Grows as elements arrive, so an instance that publishes little costs little.
struct BoundedRing<Element> {
    private var elements: [Element] = []
    private var start = 0
    let capacity: Int

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    mutating func append(_ element: Element) {
        guard capacity > 0 else { return }
        if elements.count < capacity {
            elements.append(element)
        } else {
            elements[start] = element
            start = start + 1 == capacity ? 0 : start + 1
        }
    }

    /// The elements, oldest first.
    var inOrder: [Element] { Array(elements[start...] + elements[..<start]) }
}

/// An instance's recent actions and the origins of its recent versions, bounded by its history's
/// capacity. The actions are kept in memory only: an instance brought back from the store knows
/// which action produced each stored version, not what the action was.
struct ProvenanceLog {
    private var actions: BoundedRing<ActionRecord>
    private var origins: BoundedRing<VersionOrigin>

    init(capacity: Int) {
        actions = BoundedRing(capacity: capacity)
        origins = BoundedRing(capacity: capacity)
    }

    mutating func record(_ action: ActionRecord) { actions.append(action) }
    mutating func record(_ origin: VersionOrigin) { origins.append(origin) }

    /// The kept actions, by sequence (requests on several threads may record them out of order).
    var recentActions: [ActionRecord] { actions.inOrder.sorted { $0.seq < $1.seq } }

    /// The kept origins by version.
    var originsByVersion: [UInt64: VersionOrigin] {
        Dictionary(origins.inOrder.map { ($0.version, $0) }, uniquingKeysWith: { _, newer in newer })
    }
}
