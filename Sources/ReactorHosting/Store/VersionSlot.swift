import Locking
import Synchronization

/// With ``Durability/async``, where a session keeps the versions it published for the batch
/// being queued, instead of queuing each one: the ``GroupCommitter``'s queue and its lock are
/// left alone, and no object is made per version. The rule of ``PendingVersion`` applies as the
/// versions arrive: a version followed by a later one is dropped once its action has settled
/// (or when none produced it). The committer moves what the slot holds into the batch, in order,
/// when it takes the batch, and before any write of the session that must follow it.
///
/// Only the committer fills an empty slot, under its queue's lock, and lists the session with
/// the batch being queued; so a slot that holds versions always belongs to that batch, and the
/// settle of an action whose version the slot drops is in the same batch as the version that
/// stands for it.
protocol LatestVersionSlot: AnyObject, Sendable {
    /// The session's id.
    var id: String { get }
    /// Empties the slot: its versions, oldest first, each with whether its action had settled
    /// (or none produced it).
    func take() -> [(version: any PendingVersion, settled: Bool)]
    /// Holds `version` (a ``PublishedVersion`` of this slot's state type) in the empty slot.
    func fill(with version: any PendingVersion)
    /// The action `seq` has settled: the versions it produced that a later one follows are
    /// dropped, and its last one may be once one does.
    func settled(_ seq: UInt64)
    /// Empties the slot, dropping its versions with their instance.
    func clear()
}

/// A ``LatestVersionSlot`` keeping the states as the reactor made them, in place, encoded only
/// once the committer takes them.
final class VersionSlot<State: Encodable & Sendable>: LatestVersionSlot, @unchecked Sendable {
    // @unchecked Sendable: the states live in memory `Held.storage` points at, which is only
    // allocated, read, written and freed inside `held.withLock`, together with the entries that
    // say which of it is initialized; `id` and `publisher` are constants.
    // `SlotEntry` and `SlotContents` are not nested here: as types of a generic class they would
    // be generic too, and each use in this unspecialized code would look their metadata up.
    private typealias Entry = SlotEntry

    /// How many versions a slot holds: past it, the committer queues them.
    static var capacity: Int { 8 }

    let id: String
    private let publisher: StatePublisher<State>
    private let held = Locked(SlotContents())

    init(id: String, publisher: StatePublisher<State>) {
        self.id = id
        self.publisher = publisher
    }

    deinit {
        clear()
    }

    /// Whether the session had readers when its last version was shown, who may have been shown
    /// it: then it is kept, so the next version is queued instead of offered.
    let lastShownWatched = Atomic<Bool>(false)

    /// Holds `state` after the versions held, dropping the last of them if its action has
    /// settled. Changes nothing and returns false when the slot is empty (the committer fills
    /// it) or full.
    func offer(_ state: State, origin: VersionOrigin, startedThrough: UInt64, lastActivity: Int64) -> Bool {
        held.withLock { held in
            guard let storage = held.storage, let last = held.entries.last else { return false }
            let states = storage.assumingMemoryBound(to: State.self)
            if last.settled {
                (states + held.entries.count - 1).deinitialize(count: 1)
                held.entries.removeLast()
            } else if held.entries.count == Self.capacity {
                return false
            }
            (states + held.entries.count).initialize(to: state)
            held.entries.append(
                Entry(origin: origin, startedThrough: startedThrough, lastActivity: lastActivity, settled: origin.producedBy == 0))
            return true
        }
    }

    func fill(with version: any PendingVersion) {
        // The committer fills a slot only with a version of the instance that made it.
        let version = version as! PublishedVersion<State>
        held.withLock { held in
            precondition(held.entries.isEmpty, "a slot is filled only when empty")
            let storage =
                held.storage
                ?? UnsafeMutableRawPointer.allocate(
                    byteCount: MemoryLayout<State>.stride * Self.capacity, alignment: MemoryLayout<State>.alignment)
            held.storage = storage
            storage.assumingMemoryBound(to: State.self).initialize(to: version.state)
            held.entries.append(
                Entry(
                    origin: version.origin, startedThrough: version.startedThrough, lastActivity: version.lastActivity,
                    settled: version.producedBy == 0))
        }
    }

    func settled(_ seq: UInt64) {
        held.withLock { held in
            guard let storage = held.storage, held.entries.contains(where: { $0.origin.producedBy == seq }) else { return }
            let states = storage.assumingMemoryBound(to: State.self)
            let count = held.entries.count
            var kept = 0
            for index in 0..<count {
                var entry = held.entries[index]
                if entry.origin.producedBy == seq { entry.settled = true }
                if entry.settled && index < count - 1 {
                    (states + index).deinitialize(count: 1)
                    continue
                }
                if kept != index { (states + kept).moveInitialize(from: states + index, count: 1) }
                held.entries[kept] = entry
                kept += 1
            }
            held.entries.removeLast(count - kept)
        }
    }

    func take() -> [(version: any PendingVersion, settled: Bool)] {
        held.withLock { held in
            guard let storage = held.storage else { return [] }
            let states = storage.assumingMemoryBound(to: State.self)
            var taken: [(version: any PendingVersion, settled: Bool)] = []
            taken.reserveCapacity(held.entries.count)
            for (index, entry) in held.entries.enumerated() {
                let version = PublishedVersion(
                    id: id, state: (states + index).move(), origin: entry.origin, startedThrough: entry.startedThrough,
                    lastActivity: entry.lastActivity, publisher: publisher)
                taken.append((version, entry.settled))
            }
            held.empty()
            return taken
        }
    }

    func clear() {
        held.withLock { held in
            guard let storage = held.storage else { return }
            storage.assumingMemoryBound(to: State.self).deinitialize(count: held.entries.count)
            held.empty()
        }
    }
}

/// What a version a ``VersionSlot`` holds needs besides its state.
private struct SlotEntry {
    var origin: VersionOrigin
    var startedThrough: UInt64
    var lastActivity: Int64
    /// Whether the action that produced it has settled (or none did).
    var settled: Bool
}

/// The versions a ``VersionSlot`` holds: `entries[i]` goes with the state at `storage` + i.
private struct SlotContents {
    var entries: [SlotEntry] = []
    /// Room for `VersionSlot.capacity` states, the first `entries.count` initialized; nil while
    /// empty.
    var storage: UnsafeMutableRawPointer?

    /// Forgets the entries and frees the storage, whose states were moved out or deinitialized.
    mutating func empty() {
        entries = []
        storage?.deallocate()
        storage = nil
    }
}
