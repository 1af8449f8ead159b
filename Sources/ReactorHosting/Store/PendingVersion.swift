import Synchronization

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
package protocol PendingVersion: AnyObject, Sendable {
    /// The session's id.
    var id: String { get }
    /// The state's version.
    var version: UInt64 { get }
    /// The sequence of the last action the instance had started (see ``StoredSession/startedThrough``).
    var startedThrough: UInt64 { get }
    /// The sequence of the action whose mutation produced it (0: none did).
    var producedBy: UInt64 { get }
    /// When it was published, in milliseconds since 1970.
    var lastActivity: Int64 { get }
    /// Whether the session has readers now.
    var hasReaders: Bool { get }
    /// The write that stores it, encoding the state (once).
    func write() -> SessionWrite
    /// Told what became of its commit, as a write's completion is (see ``GroupCommitter``): a
    /// version is shown once committed, never when its commit failed or was overtaken.
    func committed(_ outcome: CommitOutcome)
}

/// A version an instance published, with its state as the reactor made it: encoded only if its
/// batch keeps it, shown once committed (or at once with ``Durability/async``). One object per
/// version, holding what its commit needs, so queuing one allocates nothing else.
final class PublishedVersion<State: Encodable & Sendable>: PendingVersion {
    let id: String
    let startedThrough: UInt64
    let lastActivity: Int64
    let state: State
    let origin: VersionOrigin
    private let publisher: StatePublisher<State>
    private let encoded = Mutex<[UInt8]?>(nil)

    /// Version `origin.version` of session `id`, `state`, which `publisher` shows once committed.
    init(
        id: String, state: State, origin: VersionOrigin, startedThrough: UInt64, lastActivity: Int64,
        publisher: StatePublisher<State>
    ) {
        self.id = id
        self.startedThrough = startedThrough
        self.lastActivity = lastActivity
        self.state = state
        self.origin = origin
        self.publisher = publisher
    }

    var version: UInt64 { origin.version }

    var producedBy: UInt64 { origin.producedBy }

    var hasReaders: Bool { publisher.timeline.subscriberCount > 0 }

    /// The state's JSON once the commit thread encoded it (the same bytes are stored and sent);
    /// nil for a version the store did not keep, or before its batch is taken.
    var json: [UInt8]? { encoded.withLock { $0 } }

    func write() -> SessionWrite {
        let json = encoded.withLock { encoded in
            if let encoded { return encoded }
            let json = JSONCoding.encodeState(state)
            encoded = json
            return json
        }
        return .version(
            id: id, version: version, state: json, startedThrough: startedThrough, producedBy: producedBy,
            lastActivity: lastActivity)
    }

    func committed(_ outcome: CommitOutcome) {
        // A failed or overtaken commit drops the instance; its state is never shown.
        if outcome == .committed { publisher.publish(state, version: version, json: json, origin: origin) }
    }
}

/// A write waiting in the ``GroupCommitter``'s queue.
enum QueuedWrite: Sendable {
    /// Ready as it is.
    case ready(SessionWrite)
    /// A version, encoded when its batch is taken, if kept (see ``PendingVersion``).
    case version(any PendingVersion)

    var instanceID: String {
        switch self {
        case .ready(let write): return write.instanceID
        case .version(let pending): return pending.id
        }
    }
}
