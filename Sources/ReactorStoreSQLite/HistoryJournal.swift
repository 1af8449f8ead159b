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
    /// Every unfolded row as `(row, session)`, oldest first, from `head`; entries of sessions
    /// folded or deleted since are skipped when reached.
    private var order: [(row: Int64, id: String)] = []
    private var head = 0
    /// The last row deleted from the table; rows after it are still there.
    private(set) var deletedThrough: Int64 = 0
    /// The newest row's number (rows are numbered here, so numbers never go back even when
    /// every row was deleted).
    private(set) var lastRow: Int64 = 0

    /// The journal of a table whose rows are `rows` `(row, session)`, in order; all unfolded.
    init(rows existing: [(row: Int64, id: String)] = []) {
        for (row, id) in existing {
            rows[id, default: []].append(row)
            order.append((row, id))
        }
        lastRow = existing.last?.row ?? 0
        deletedThrough = (existing.first?.row).map { $0 - 1 } ?? 0
    }

    /// Numbers and records a new row of `id`.
    mutating func append(id: String) -> Int64 {
        lastRow += 1
        rows[id, default: []].append(lastRow)
        order.append((lastRow, id))
        return lastRow
    }

    /// The sessions whose oldest unfolded row is at or before `row`, oldest first, each once.
    func sessions(withRowsThrough row: Int64) -> [String] {
        var ids: [String] = []
        var seen: Set<String> = []
        var index = head
        while index < order.count, order[index].row <= row {
            let entry = order[index]
            if rows[entry.id]?.first == entry.row, seen.insert(entry.id).inserted { ids.append(entry.id) }
            index += 1
        }
        return ids
    }

    /// Forgets the unfolded rows of `id` (folded into the history table, or the session deleted).
    mutating func forget(_ id: String) {
        rows[id] = nil
    }

    /// Records that the table's rows through `row` are deleted (every session with a row there
    /// was folded first), and drops their entries.
    mutating func deleted(through row: Int64) {
        deletedThrough = max(deletedThrough, row)
        while head < order.count, order[head].row <= row { head += 1 }
        if head > 1024, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
