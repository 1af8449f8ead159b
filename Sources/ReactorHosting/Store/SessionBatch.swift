/// One batch of writes as a durable store applies it: what a later write of the same batch
/// undoes is skipped (an action accepted and settled in one batch is never written), and a
/// session's versions in the batch are written together, where its last version stands.
public struct SessionBatch {
    /// One version of a session, as the history keeps it.
    public struct Version: Sendable {
        /// The state's version.
        public let version: UInt64
        /// The sequence of the action whose mutation produced it (0: none did).
        public let producedBy: UInt64
        /// The state's JSON.
        public let state: [UInt8]

        /// A version as the history keeps it.
        public init(version: UInt64, producedBy: UInt64, state: [UInt8]) {
            self.version = version
            self.producedBy = producedBy
            self.state = state
        }
    }

    /// An action of a session: what a batch's accepts and settles are matched by.
    struct ActionKey: Hashable {
        let id: String
        let seq: UInt64
    }

    /// How the batch's writes of one action begin and end.
    private struct ActionWrites {
        /// Whether the first is an accept (before it, nothing settles a stored record).
        let beginsAccepted: Bool
        /// Whether the last is a settle.
        var endsSettled: Bool
    }

    /// The writes, in order.
    public let writes: [SessionWrite]
    private var actions: [ActionKey: ActionWrites] = [:]
    private var versions: [String: [Version]] = [:]

    /// Plans `writes`.
    public init(_ writes: [SessionWrite]) {
        self.writes = writes
        for write in writes {
            switch write {
            case .accept(let id, let seq, _, _):
                actions[ActionKey(id: id, seq: seq), default: ActionWrites(beginsAccepted: true, endsSettled: false)]
                    .endsSettled = false
            case .settle(let id, let seq):
                actions[ActionKey(id: id, seq: seq), default: ActionWrites(beginsAccepted: false, endsSettled: true)]
                    .endsSettled = true
            case .version(let id, let version, let state, _, let producedBy, _):
                versions[id, default: []].append(Version(version: version, producedBy: producedBy, state: state))
            default: break
            }
        }
    }

    /// Whether the batch's last write of the action settles it, so accepting it need not be
    /// written.
    public func settlesLater(id: String, seq: UInt64) -> Bool {
        actions[ActionKey(id: id, seq: seq)]?.endsSettled ?? false
    }

    /// Whether the batch accepts the action before anything settles it, so that settling it has
    /// no stored record to drop. A settle that comes first drops the stored record, even when a
    /// later write accepts the sequence again (an action renumbered at activation into the
    /// sequence of one that is settled in the same batch).
    public func acceptedInBatch(id: String, seq: UInt64) -> Bool {
        actions[ActionKey(id: id, seq: seq)]?.beginsAccepted ?? false
    }

    /// The session's versions in the batch, oldest first, when `version` is the last of them
    /// (where they are written); nil for its other versions.
    public func versions(of id: String, endingAt version: UInt64) -> [Version]? {
        guard let entries = versions[id], entries.last?.version == version else { return nil }
        return entries
    }

    /// The sessions the batch writes to.
    public var sessionIDs: Set<String> {
        Set(writes.map(\.instanceID))
    }
}

extension SessionWrite {
    /// The session the write is about.
    public var instanceID: String {
        switch self {
        case .create(let id, _, _, _, _, _), .accept(let id, _, _, _), .settle(let id, _), .attempt(let id, _),
            .version(let id, _, _, _, _, _), .touch(let id, _), .delete(let id), .release(let id), .publishingAhead(let id):
            return id
        }
    }
}
