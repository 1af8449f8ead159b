/// Which rows of the store's history journal are not yet folded into the per-session history
/// table: for each session its rows in commit order, and all of them in commit order, oldest
/// first, so the oldest can be folded once the journal outgrows its window.
///
/// A commit appends each session's new versions to the journal (one row each, at the end of the
/// table: a page or two per commit, whichever sessions it touched). A session's rows are folded
/// into the `history` table, all at once, when its oldest falls out of the window; the rows
/// before the window are then deleted as one range. The journal's rows of a folded session may
/// stay in the table until that range passes them: the per-session table already holds them, and
/// a store reopened after a crash folds them again to the same keys.
struct HistoryJournal {
    /// The unfolded rows of each session, oldest first.
    private(set) var rows: [String: [Int64]] = [:]
    /// The newest version in each session's unfolded rows, and its last activity: newer than its
    /// `sessions` row, which is written when its rows are folded (0 for rows a build before
    /// that wrote, whose `sessions` row is as new).
    private(set) var newest: [String: (version: UInt64, lastActivity: Int64)] = [:]
    /// Each session's oldest unfolded row as `(row, session)`, oldest first, from `head`: one
    /// entry each time a session gains rows after having none. Entries of sessions folded or
    /// deleted since are skipped when reached, so finding the sessions due to be folded reads
    /// only those, not every row of the window.
    private var oldest: [(row: Int64, id: String)] = []
    private var head = 0
    /// The last row deleted from the table; rows after it are still there.
    private(set) var deletedThrough: Int64 = 0
    /// The newest row's number (rows are numbered here, so numbers never go back even when
    /// every row was deleted).
    private(set) var lastRow: Int64 = 0

    /// The journal of a table whose rows are `rows` `(row, session)`, in order; all unfolded.
    init(rows existing: [(row: Int64, id: String, version: UInt64, lastActivity: Int64)] = []) {
        for (row, id, version, lastActivity) in existing {
            if rows[id] == nil { oldest.append((row, id)) }
            rows[id, default: []].append(row)
            newest[id] = (version, lastActivity)
        }
        lastRow = existing.last?.row ?? 0
        deletedThrough = (existing.first?.row).map { $0 - 1 } ?? 0
    }

    /// Numbers and records a new row of `id`, whose newest version is `version`, published at
    /// `lastActivity`.
    mutating func append(id: String, version: UInt64, lastActivity: Int64) -> Int64 {
        lastRow += 1
        if rows[id] == nil { oldest.append((lastRow, id)) }
        rows[id, default: []].append(lastRow)
        newest[id] = (version, max(lastActivity, newest[id]?.lastActivity ?? 0))
        return lastRow
    }

    /// Whether `id` has unfolded rows published at `cutoff` or later: activity its `sessions`
    /// row does not show yet.
    func isActive(_ id: String, since cutoff: Int64) -> Bool {
        (newest[id]?.lastActivity ?? .min) >= cutoff
    }

    /// The sessions whose oldest unfolded row is at or before `row`, oldest first, each once.
    mutating func sessions(withRowsThrough row: Int64) -> [String] {
        while head < oldest.count, rows[oldest[head].id]?.first != oldest[head].row { head += 1 }
        compact()
        var ids: [String] = []
        var index = head
        while index < oldest.count, oldest[index].row <= row {
            let entry = oldest[index]
            if rows[entry.id]?.first == entry.row { ids.append(entry.id) }
            index += 1
        }
        return ids
    }

    /// Forgets the unfolded rows of `id` (folded into the history table, or the session deleted).
    mutating func forget(_ id: String) {
        rows[id] = nil
        newest[id] = nil
    }

    /// Records that the table's rows through `row` are deleted (every session with a row there
    /// was folded first).
    mutating func deleted(through row: Int64) {
        deletedThrough = max(deletedThrough, row)
    }

    /// Drops the entries before `head` once they are most of the list.
    private mutating func compact() {
        if head > 1024, head * 2 > oldest.count {
            oldest.removeFirst(head)
            head = 0
        }
    }
}
