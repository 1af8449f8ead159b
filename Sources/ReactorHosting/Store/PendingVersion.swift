import Locking

/// A published state on its way to the session store, not yet encoded: the commit thread encodes
/// the versions it keeps, off the threads that apply actions, and only those.
///
/// A batch keeps each session's last version (``QueuedBatch`` leaves the others out as they are
/// queued). It keeps the versions before it while the session
/// has readers (an open event stream), who may be shown any of them and resume from it, and the
/// versions of actions not settled in the batch, which a restart counts to tell the recovery hook
/// how far an interrupted action got (``PendingAction/producedVersions``). Any other version
/// nobody was watching when it was committed is only ever seen as part of the latest, so the
/// store keeps the latest alone (the history's bound drops old versions anyway). So a hot
/// session's commit writes one state, not one per mutation.
package final class PendingVersion: Sendable {
    let id: String
    let version: UInt64
    let startedThrough: UInt64
    let producedBy: UInt64
    let lastActivity: Int64
    private let encode: @Sendable () -> [UInt8]
    /// Whether the session has readers now.
    let hasReaders: @Sendable () -> Bool
    private let encoded = Locked<[UInt8]?>(nil)

    /// A version of session `id` whose state `encode` encodes; `isWatched` tells whether the
    /// session has readers now.
    package init(
        id: String, version: UInt64, startedThrough: UInt64, producedBy: UInt64, lastActivity: Int64,
        encode: @escaping @Sendable () -> [UInt8], isWatched: @escaping @Sendable () -> Bool
    ) {
        self.id = id
        self.version = version
        self.startedThrough = startedThrough
        self.producedBy = producedBy
        self.lastActivity = lastActivity
        self.encode = encode
        self.hasReaders = isWatched
    }

    /// The state's JSON once the commit thread encoded it (the same bytes are stored and sent);
    /// nil for a version the store did not keep, or before its batch is taken.
    package var json: [UInt8]? { encoded.withLock { $0 } }

    /// The write that stores it, encoding the state (once).
    func write() -> SessionWrite {
        let json = encoded.withLock { encoded in
            if let encoded { return encoded }
            let json = encode()
            encoded = json
            return json
        }
        return .version(
            id: id, version: version, state: json, startedThrough: startedThrough, producedBy: producedBy,
            lastActivity: lastActivity)
    }
}

/// A write waiting in the ``GroupCommitter``'s queue.
enum QueuedWrite: Sendable {
    /// Ready as it is.
    case ready(SessionWrite)
    /// A version, encoded when its batch is taken, if kept (see ``PendingVersion``).
    case version(PendingVersion)

    var instanceID: String {
        switch self {
        case .ready(let write): return write.instanceID
        case .version(let pending): return pending.id
        }
    }
}
