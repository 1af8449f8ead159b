/// Which rows of the store's history journal are not yet folded into the per-session history
/// table: for each session its rows in commit order, and all of them in commit order, oldest
/// first, so the oldest can be folded once the journal outgrows its window.
///
/// The journal is a ring of ``slots`` rows: row `n` is written to slot `n % slots`, over a row
/// folded long before, so a commit rewrites the page or two its rows land on and allocates and
/// frees none (no free-list pages, no page 1 in its log). A session's rows are folded into the
/// `history` table, all at once, when its oldest falls out of the window; their slots may then be
/// written again. A folded row stays in its slot until it is written over: the per-session table
/// already holds it, and the session's `sessions` row, brought up to it by the fold, tells a
/// reopened store so. Except a large row (over ``largeRowBytes``, a state of a few kilobytes):
/// its session's fold deletes it, so the ring does not keep that many of them folded, and the
/// journal's unfolded large rows are kept to a byte budget as well as to the window.
struct HistoryJournal {
    /// A row holding more bytes of versions than this is large.
    static let largeRowBytes = 1_024
    /// The unfolded rows of each session, oldest first.
    private(set) var rows: [String: [Int64]] = [:]
    /// The newest version in each session's unfolded rows, and its last activity: newer than its
    /// `sessions` row, which is written when its rows are folded.
    private(set) var newest: [String: (version: UInt64, lastActivity: Int64)] = [:]
    /// Each session's oldest unfolded row as `(row, session)`, oldest first, from `head`: one
    /// entry each time a session gains rows after having none, or keeps rows a fold did not take
    /// (``forget(_:through:)``). Entries of sessions folded or
    /// deleted since are skipped when reached, so finding the sessions due to be folded reads
    /// only those, not every row of the window.
    private var oldest: [(row: Int64, id: String)] = []
    private var head = 0
    /// Every row through this one is folded (or its session deleted): their slots may be written.
    private(set) var foldedThrough: Int64 = 0
    /// The newest row's number (rows are numbered here, so numbers never go back).
    private(set) var lastRow: Int64 = 0
    /// The rows the table holds at most, each in slot `row % slots`.
    let slots: Int64
    /// The unfolded large rows, with their bytes of versions, and those bytes together.
    private(set) var largeRows: [Int64: Int] = [:]
    private(set) var largeBytes = 0

    /// The journal of a table of `slots` slots whose unfolded rows are `existing`
    /// `(row, session, …)`, in order, and whose newest row, folded or not, is `lastRow`.
    init(
        slots: Int64, rows existing: [(row: Int64, id: String, version: UInt64, lastActivity: Int64, bytes: Int)] = [],
        lastRow: Int64 = 0
    ) {
        self.slots = max(1, slots)
        for (row, id, version, lastActivity, bytes) in existing {
            if rows[id] == nil { oldest.append((row, id)) }
            rows[id, default: []].append(row)
            newest[id] = (version, lastActivity)
            noteSize(of: row, bytes)
        }
        self.lastRow = max(lastRow, existing.last?.row ?? 0)
        foldedThrough = (existing.first?.row).map { $0 - 1 } ?? self.lastRow
    }

    /// The slot row `row` is written to.
    func slot(of row: Int64) -> Int64 { row % slots }

    /// The row, if any, that must be folded before `rows` more can be appended without writing
    /// over an unfolded one: rows through it are due (nil when every slot they take is free, or
    /// holds a row through `alsoFolded`, folded since, in the commit not yet ended).
    func mustFold(beforeAppending rows: Int, alsoFolded: Int64 = 0) -> Int64? {
        let through = lastRow + Int64(rows) - slots
        return through > max(foldedThrough, alsoFolded) ? through : nil
    }

    /// Numbers and records a new row of `id`, whose newest version is `version`, published at
    /// `lastActivity`, holding `bytes` of versions.
    mutating func append(id: String, version: UInt64, lastActivity: Int64, bytes: Int = 0) -> Int64 {
        lastRow += 1
        if rows[id] == nil { oldest.append((lastRow, id)) }
        rows[id, default: []].append(lastRow)
        newest[id] = (version, max(lastActivity, newest[id]?.lastActivity ?? 0))
        noteSize(of: lastRow, bytes)
        return lastRow
    }

    private mutating func noteSize(of row: Int64, _ bytes: Int) {
        guard bytes > Self.largeRowBytes else { return }
        largeRows[row] = bytes
        largeBytes += bytes
    }

    /// Whether `id` has unfolded rows published at `cutoff` or later: activity its `sessions`
    /// row does not show yet.
    func isActive(_ id: String, since cutoff: Int64) -> Bool {
        (newest[id]?.lastActivity ?? .min) >= cutoff
    }

    /// The oldest unfolded row, if any.
    mutating func oldestUnfoldedRow() -> Int64? {
        skipStaleEntries()
        return head < oldest.count ? oldest[head].row : nil
    }

    /// The sessions whose oldest unfolded row is at or before `row`, oldest first, each once.
    mutating func sessions(withRowsThrough row: Int64) -> [String] {
        skipStaleEntries()
        var ids: [String] = []
        var index = head
        while index < oldest.count, oldest[index].row <= row {
            let entry = oldest[index]
            if rows[entry.id]?.first == entry.row { ids.append(entry.id) }
            index += 1
        }
        return ids
    }

    /// Forgets the unfolded rows of `id` through `row` (folded into the history table), or all
    /// of them (the session deleted). Rows it gained since stay, with its newest version.
    mutating func forget(_ id: String, through row: Int64 = .max) {
        if !largeRows.isEmpty {
            for forgotten in rows[id] ?? [] where forgotten <= row {
                if let bytes = largeRows.removeValue(forKey: forgotten) { largeBytes -= bytes }
            }
        }
        guard let remaining = rows[id]?.drop(while: { $0 <= row }), !remaining.isEmpty else {
            rows[id] = nil
            newest[id] = nil
            return
        }
        let first = remaining[remaining.startIndex]
        rows[id] = Array(remaining)
        // In order among the others: rows appended after its first may have theirs already.
        var index = oldest.endIndex
        while index > head, oldest[index - 1].row > first { index -= 1 }
        oldest.insert((first, id), at: index)
    }

    /// Records that every row through `row` is folded (each session with a row there was).
    mutating func folded(through row: Int64) {
        foldedThrough = max(foldedThrough, row)
    }

    /// Moves `head` past the entries of sessions folded or deleted since, then compacts.
    private mutating func skipStaleEntries() {
        while head < oldest.count, rows[oldest[head].id]?.first != oldest[head].row { head += 1 }
        compact()
    }

    /// Drops the entries before `head` once they are most of the list.
    private mutating func compact() {
        if head > 1024, head * 2 > oldest.count {
            oldest.removeFirst(head)
            head = 0
        }
    }
}
