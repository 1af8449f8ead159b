import ReactorHosting

/// What the journal holds that its tables do not yet: which sessions have writes in unfolded
/// rows, whether those rows create or delete a session, and the newest version they hold. A read
/// of such a session reads its journaled writes too; a commit checks a new version against the
/// newest one journaled.
struct JournalIndex {
    /// Unfolded rows per session.
    private var rowsPerSession: [String: Int] = [:]
    /// Whether the session exists after its journaled writes, for those whose writes create or
    /// delete it.
    private var existence: [String: Bool] = [:]
    /// The newest version journaled per session (0 for a creation).
    private var newestVersions: [String: UInt64] = [:]
    /// The sessions each unfolded row names, by row.
    private var sessionsPerRow: [Int64: Set<String>] = [:]

    /// Whether the journal holds unfolded writes of the session.
    func isJournaled(_ id: String) -> Bool { rowsPerSession[id] != nil }

    /// Whether the session exists once its journaled writes are applied; nil when they neither
    /// create nor delete it (the tables know).
    func exists(_ id: String) -> Bool? { existence[id] }

    /// The newest version the journal holds of the session, nil when it holds none (the tables
    /// know), or when the journal deletes it.
    func newestVersion(of id: String) -> UInt64? { newestVersions[id] }

    /// Row `row` was committed with `writes`.
    mutating func add(row: Int64, writes: [SessionWrite]) {
        var sessions: Set<String> = []
        for write in writes {
            let id = write.instanceID
            if sessions.insert(id).inserted { rowsPerSession[id, default: 0] += 1 }
            switch write {
            case .create:
                existence[id] = true
                newestVersions[id] = 0
            case .version(_, let version, _, _, _, _) where existence[id] != false:
                newestVersions[id] = version
            case .delete:
                existence[id] = false
                newestVersions[id] = nil
            default:
                break
            }
        }
        sessionsPerRow[row] = sessions
    }

    /// Rows up to `row` were folded into the tables.
    mutating func folded(through row: Int64) {
        for (folded, sessions) in sessionsPerRow where folded <= row {
            sessionsPerRow[folded] = nil
            for id in sessions {
                let left = (rowsPerSession[id] ?? 1) - 1
                if left > 0 {
                    rowsPerSession[id] = left
                } else {
                    rowsPerSession[id] = nil
                    existence[id] = nil
                    newestVersions[id] = nil
                }
            }
        }
    }
}
