import Testing

@testable import ReactorStoreSQLite

/// Which sessions the journal finds due to be folded: those whose oldest unfolded row falls at or
/// before the cutoff, oldest first, each once, and never one folded or deleted since.
@Suite struct HistoryJournalTests {
    @Test func theSessionsDueAreThoseWhoseOldestRowIsAtOrBeforeTheCutoffOldestFirst() {
        var journal = HistoryJournal()
        for id in ["a", "b", "a", "c", "b", "a"] { _ = journal.append(id: id) }
        #expect(journal.sessions(withRowsThrough: 1) == ["a"])
        #expect(journal.sessions(withRowsThrough: 3) == ["a", "b"])
        #expect(journal.sessions(withRowsThrough: 6) == ["a", "b", "c"])
        #expect(journal.rows["a"] == [1, 3, 6])
    }

    @Test func aFoldedSessionIsDueAgainOnlyByTheRowsItGainsAfterwards() {
        var journal = HistoryJournal()
        for id in ["a", "b", "a"] { _ = journal.append(id: id) }
        journal.forget("a")
        journal.deleted(through: 1)
        #expect(journal.sessions(withRowsThrough: 3) == ["b"])
        _ = journal.append(id: "a")
        #expect(journal.sessions(withRowsThrough: 3) == ["b"])
        #expect(journal.sessions(withRowsThrough: 4) == ["b", "a"])
        journal.forget("b")
        #expect(journal.sessions(withRowsThrough: 4) == ["a"])
    }

    @Test func aReopenedJournalFindsTheSameSessionsDue() {
        let rows: [(row: Int64, id: String)] = [(7, "a"), (8, "b"), (9, "a"), (10, "c")]
        var journal = HistoryJournal(rows: rows)
        #expect(journal.lastRow == 10)
        #expect(journal.deletedThrough == 6)
        #expect(journal.sessions(withRowsThrough: 9) == ["a", "b"])
        #expect(journal.append(id: "b") == 11)
    }

    @Test func manyFoldsKeepTheListShort() {
        var journal = HistoryJournal()
        for round in 0..<3_000 {
            let id = "s\(round % 50)"
            _ = journal.append(id: id)
            if round % 7 == 0 {
                for due in journal.sessions(withRowsThrough: journal.lastRow - 100) { journal.forget(due) }
            }
        }
        let due = journal.sessions(withRowsThrough: journal.lastRow)
        #expect(Set(due).count == due.count)
        #expect(Set(due) == Set(journal.rows.keys))
    }
}
