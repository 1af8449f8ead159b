import ReactorHosting

/// One session as a read assembles it: what its rows in the tables say, then each of its writes
/// still in the journal applied in order, as a fold would apply them.
struct SessionImage {
    /// The session's row; nil when it does not exist.
    struct Row {
        var type: String
        var version: UInt64
        var state: [UInt8]
        var startedThrough: UInt64
        var lastActivity: Int64
    }

    var row: Row?
    /// Its kept versions, oldest first.
    var versions: [SessionBatch.Version] = []
    /// Its accepted actions not yet settled, by sequence.
    var pendingActions: [UInt64: [UInt8]] = [:]

    /// Applies one write of the session.
    mutating func apply(_ write: SessionWrite) {
        switch write {
        case .create(_, let type, let state, let lastActivity):
            row = Row(type: type, version: 0, state: state, startedThrough: 0, lastActivity: lastActivity)
            versions = [SessionBatch.Version(version: 0, producedBy: 0, state: state)]
            pendingActions = [:]
        case .accept(_, let seq, let action):
            if row != nil { pendingActions[seq] = action }
        case .settle(_, let seq):
            pendingActions[seq] = nil
        case .version(_, let version, let state, let startedThrough, let producedBy, let lastActivity):
            guard var current = row, current.version < version else { return }
            current.version = version
            current.state = state
            current.startedThrough = startedThrough
            current.lastActivity = max(current.lastActivity, lastActivity)
            row = current
            versions.append(SessionBatch.Version(version: version, producedBy: producedBy, state: state))
        case .touch(_, let lastActivity):
            if var current = row {
                current.lastActivity = max(current.lastActivity, lastActivity)
                row = current
            }
        case .delete:
            row = nil
            versions = []
            pendingActions = [:]
        case .release:
            break
        }
    }

    /// The session as stored, keeping `capacity` versions of history; nil when it does not exist.
    func stored(capacity: Int) -> StoredSession? {
        guard let row else { return nil }
        var stored = StoredSession(type: row.type, version: row.version, state: row.state,
                                   startedThrough: row.startedThrough, lastActivity: row.lastActivity,
                                   history: [], pendingActions: [])
        stored.restore(versions: versions, capacity: capacity,
                       pendingActions: pendingActions.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        return stored
    }
}
