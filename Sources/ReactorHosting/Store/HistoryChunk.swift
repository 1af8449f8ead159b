/// The versions of one session written by one batch, as a store keeps them in one row: for each, its version,
/// the action that produced it and its state, as 8 + 8 + 4 bytes (little-endian) and the state.
public struct HistoryChunk: Sendable {
    /// The versions, oldest first.
    public let entries: [SessionBatch.Version]

    /// A chunk of these versions (at least one).
    public init(entries: [SessionBatch.Version]) {
        self.entries = entries
    }

    /// The entries of an encoded chunk; nil when the bytes are not one.
    public init?(decoding bytes: [UInt8]) {
        var entries: [SessionBatch.Version] = []
        var offset = 0
        func integer(_ width: Int) -> UInt64? {
            guard offset + width <= bytes.count else { return nil }
            var value: UInt64 = 0
            for index in (0..<width).reversed() { value = value << 8 | UInt64(bytes[offset + index]) }
            offset += width
            return value
        }
        while offset < bytes.count {
            guard let version = integer(8), let producedBy = integer(8), let count = integer(4),
                offset + Int(count) <= bytes.count
            else { return nil }
            entries.append(
                SessionBatch.Version(version: version, producedBy: producedBy, state: Array(bytes[offset..<offset + Int(count)])))
            offset += Int(count)
        }
        guard !entries.isEmpty else { return nil }
        self.entries = entries
    }

    /// After a batch wrote versions `firstVersion...lastVersion` of a session, the last version
    /// whose chunks its history may drop (those hold only versions older than `capacity` keeps);
    /// nil unless the versions crossed a multiple of `capacity`, so that a busy session pays for
    /// the trim once per capacity rather than once per batch.
    public static func trimmedThrough(firstVersion: UInt64, lastVersion: UInt64, capacity: Int) -> UInt64? {
        let capacity = UInt64(max(1, capacity))
        guard lastVersion >= capacity, (firstVersion - 1) / capacity != lastVersion / capacity else { return nil }
        return lastVersion - capacity
    }

    /// The chunk's bytes, as a store keeps them.
    public func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(entries.reduce(0) { $0 + 20 + $1.state.count })
        func append(_ value: UInt64, width: Int) {
            for index in 0..<width { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(index)))) }
        }
        for entry in entries {
            append(entry.version, width: 8)
            append(entry.producedBy, width: 8)
            append(UInt64(entry.state.count), width: 4)
            bytes.append(contentsOf: entry.state)
        }
        return bytes
    }
}

extension StoredSession {
    /// Fills in what a store reads besides the session's row: its history, the `capacity`'s
    /// worth of `versions` up to the latest, oldest first; its pending actions `(seq, JSON)`
    /// in order, each with how many of the stored versions it produced; and the idempotency
    /// keys of `keys` whose actions are still in the window (``RememberedKey/window``).
    public mutating func restore(
        versions: [SessionBatch.Version], capacity: Int, pendingActions: [(seq: UInt64, action: [UInt8])],
        keys: [RememberedKey] = []
    ) {
        restore(
            versions: versions, capacity: capacity,
            pendingActions: pendingActions.map { (seq: $0.seq, action: $0.action, attempts: 0) }, keys: keys)
    }

    /// Fills in the same as the method above, with how many restarts began to run each pending
    /// action again (``PendingAction/attempts``).
    public mutating func restore(
        versions: [SessionBatch.Version], capacity: Int, pendingActions: [(seq: UInt64, action: [UInt8], attempts: Int)],
        keys: [RememberedKey] = []
    ) {
        let startedThrough = self.startedThrough
        rememberedKeys = keys.filter { $0.seq + RememberedKey.window > startedThrough }
        let capacity = UInt64(max(1, capacity))
        let latest = version
        history = versions.filter { $0.version <= latest && $0.version + capacity > latest }
        self.pendingActions = pendingActions.map { pending in
            PendingAction(
                seq: pending.seq, action: pending.action,
                producedVersions: versions.count { $0.producedBy == pending.seq }, attempts: pending.attempts)
        }
    }
}
