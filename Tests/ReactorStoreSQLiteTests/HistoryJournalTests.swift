import Testing

@testable import ReactorStoreSQLite

/// Which sessions the journal finds due to be folded: those whose oldest unfolded row falls at or
/// before the cutoff, oldest first, each once, and never one folded or deleted since.
@Suite struct HistoryJournalTests {
    @Test func theSessionsDueAreThoseWhoseOldestRowIsAtOrBeforeTheCutoffOldestFirst() {
        var journal = HistoryJournal()
        for (version, id) in ["a", "b", "a", "c", "b", "a"].enumerated() {
            _ = journal.append(id: id, version: UInt64(version), lastActivity: 1)
        }
        #expect(journal.sessions(withRowsThrough: 1) == ["a"])
        #expect(journal.sessions(withRowsThrough: 3) == ["a", "b"])
        #expect(journal.sessions(withRowsThrough: 6) == ["a", "b", "c"])
        #expect(journal.rows["a"] == [1, 3, 6])
    }

    @Test func aFoldedSessionIsDueAgainOnlyByTheRowsItGainsAfterwards() {
        var journal = HistoryJournal()
        for id in ["a", "b", "a"] { _ = journal.append(id: id, version: 1, lastActivity: 1) }
        journal.forget("a")
        journal.deleted(through: 1)
        #expect(journal.sessions(withRowsThrough: 3) == ["b"])
        _ = journal.append(id: "a", version: 2, lastActivity: 1)
        #expect(journal.sessions(withRowsThrough: 3) == ["b"])
        #expect(journal.sessions(withRowsThrough: 4) == ["b", "a"])
        journal.forget("b")
        #expect(journal.sessions(withRowsThrough: 4) == ["a"])
    }

    @Test func aReopenedJournalFindsTheSameSessionsDue() {
        let rows: [(row: Int64, id: String, version: UInt64, lastActivity: Int64)] = [
            (7, "a", 1, 10), (8, "b", 1, 20), (9, "a", 2, 30), (10, "c", 1, 0),
        ]
        var journal = HistoryJournal(rows: rows)
        #expect(journal.lastRow == 10)
        #expect(journal.deletedThrough == 6)
        #expect(journal.sessions(withRowsThrough: 9) == ["a", "b"])
        #expect(journal.newest["a"]?.version == 2)
        #expect(journal.append(id: "b", version: 2, lastActivity: 5) == 11)
    }

    @Test func manyFoldsKeepTheListShort() {
        var journal = HistoryJournal()
        for round in 0..<3_000 {
            let id = "s\(round % 50)"
            _ = journal.append(id: id, version: UInt64(round), lastActivity: 1)
            if round % 7 == 0 {
                for due in journal.sessions(withRowsThrough: journal.lastRow - 100) { journal.forget(due) }
            }
        }
        let due = journal.sessions(withRowsThrough: journal.lastRow)
        #expect(Set(due).count == due.count)
        #expect(Set(due) == Set(journal.rows.keys))
    }

    @Test func itKnowsEachSessionsNewestVersionAndActivityUntilItIsFolded() {
        var journal = HistoryJournal()
        _ = journal.append(id: "a", version: 3, lastActivity: 100)
        _ = journal.append(id: "a", version: 5, lastActivity: 90)
        #expect(journal.newest["a"]?.version == 5)
        #expect(journal.isActive("a", since: 100), "the latest activity of its rows, not of its last row")
        #expect(!journal.isActive("a", since: 101))
        #expect(!journal.isActive("b", since: 0), "a session without rows shows no activity of its own")
        journal.forget("a")
        #expect(journal.newest["a"] == nil)
        #expect(!journal.isActive("a", since: 0))
    }
}
