import Locking

/// An idempotency key a client sent with an action, as it is remembered (and stored): the
/// action's sequence on the instance and a digest of its JSON, which tells a retry of the same
/// action from another action reusing the key.
public struct RememberedKey: Sendable, Equatable {
    /// The key, as the client sent it.
    public var key: String
    /// The sequence of the action sent with it.
    public var seq: UInt64
    /// ``RememberedKey/digest(of:)`` of the action's JSON.
    public var digest: UInt64

    /// A remembered key.
    public init(key: String, seq: UInt64, digest: UInt64) {
        self.key = key
        self.seq = seq
        self.digest = digest
    }

    /// How many actions a key is remembered for: a retry sent more than this many actions
    /// after the first attempt is taken as a new action.
    public static let window: UInt64 = 1024

    /// When a store accepting the keyed action `seq` should also forget the session's keys of
    /// actions that left the window: the highest seq to forget, now and then (every 64th
    /// action) rather than on every write; nil otherwise.
    public static func forgottenThrough(accepting seq: UInt64) -> UInt64? {
        seq % 64 == 0 && seq > window ? seq - window : nil
    }

    /// A digest of an action's JSON (64-bit FNV-1a): the same bytes give the same digest in
    /// every process, so it can be stored.
    public static func digest(of bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        return hash
    }

    /// Whether `key` may be used as an idempotency key: 1 to 255 visible ASCII characters.
    public static func isValid(_ key: String) -> Bool {
        let utf8 = key.utf8
        return (1...255).contains(utf8.count) && utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }
}

/// The idempotency keys one instance remembers, for the actions of the last
/// ``RememberedKey/window`` sequences, with the commit ticket of each action sent in this process
/// (a retry is answered when the first attempt's record is committed).
///
/// A class set once per instance, on its first keyed action (or when its stored session had
/// keys): instances whose clients send no keys pay one pointer.
final class IdempotencyKeys: Sendable {
    private struct Entry {
        let remembered: RememberedKey
        let ticket: CommitTicket?
    }

    /// Keyed sends of one instance take turns under this lock, so two requests carrying the same
    /// key cannot both send their action.
    private let entries: Locked<[String: Entry]>

    init(restoring remembered: [RememberedKey] = []) {
        entries = Locked(
            Dictionary(
                remembered.map { ($0.key, Entry(remembered: $0, ticket: nil)) },
                uniquingKeysWith: { $0.remembered.seq > $1.remembered.seq ? $0 : $1 }))
    }

    /// Moves the key remembered for the action `old` to `new` (an acknowledged action sent again
    /// after a restart under another sequence); returns it as now remembered, nil when no key
    /// names `old`.
    func renumber(_ old: UInt64, to new: UInt64) -> RememberedKey? {
        entries.withLock { entries in
            guard let (key, entry) = entries.first(where: { $0.value.remembered.seq == old }) else { return nil }
            let moved = RememberedKey(key: key, seq: new, digest: entry.remembered.digest)
            entries[key] = Entry(remembered: moved, ticket: nil)
            return moved
        }
    }

    /// What `key` was sent with, or, when it is not remembered, the result of `send` (which sends
    /// the action and returns its sequence and ticket), remembered under it; under the lock.
    func lookUpOrSend(
        _ key: String, digest: UInt64,
        _ send: () throws(HostingError) -> (seq: UInt64, ticket: CommitTicket?)
    )
        throws(HostingError) -> (remembered: RememberedKey, ticket: CommitTicket?, isReplay: Bool)
    {
        try entries.withLock { entries throws(HostingError) in
            if let entry = entries[key] { return (entry.remembered, entry.ticket, true) }
            let (seq, ticket) = try send()
            let remembered = RememberedKey(key: key, seq: seq, digest: digest)
            entries[key] = Entry(remembered: remembered, ticket: ticket)
            // Forgets the keys of actions that left the window, now and then rather than on
            // every send.
            if entries.count > 2 * Int(RememberedKey.window), seq > RememberedKey.window {
                entries = entries.filter { $0.value.remembered.seq > seq - RememberedKey.window }
            }
            return (remembered, ticket, false)
        }
    }
}
