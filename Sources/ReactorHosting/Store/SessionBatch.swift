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

    /// The writes, in order.
    public let writes: [SessionWrite]
    private var accepted: Set<ActionKey> = []
    private var settled: Set<ActionKey> = []
    private var versions: [String: [Version]] = [:]

    /// Plans `writes`.
    public init(_ writes: [SessionWrite]) {
        self.writes = writes
        for write in writes {
            switch write {
            case .accept(let id, let seq, _, _): accepted.insert(ActionKey(id: id, seq: seq))
            case .settle(let id, let seq): settled.insert(ActionKey(id: id, seq: seq))
            case .version(let id, let version, let state, _, let producedBy, _):
                versions[id, default: []].append(Version(version: version, producedBy: producedBy, state: state))
            default: break
            }
        }
    }

    /// Whether the action is settled later in the batch, so accepting it need not be written.
    public func settlesLater(id: String, seq: UInt64) -> Bool {
        settled.contains(ActionKey(id: id, seq: seq))
    }

    /// Whether the action was accepted in the batch, so there is no stored record to drop.
    public func acceptedInBatch(id: String, seq: UInt64) -> Bool {
        accepted.contains(ActionKey(id: id, seq: seq))
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
