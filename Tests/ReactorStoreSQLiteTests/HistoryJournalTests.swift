import Testing

@testable import ReactorStoreSQLite

/// Which sessions the journal finds due to be folded: those whose oldest unfolded row falls at or
/// before the cutoff, oldest first, each once, and never one folded or deleted since.
@Suite struct HistoryJournalTests {
    @Test func theSessionsDueAreThoseWhoseOldestRowIsAtOrBeforeTheCutoffOldestFirst() {
        var journal = HistoryJournal(slots: 1024)
        for (version, id) in ["a", "b", "a", "c", "b", "a"].enumerated() {
            _ = journal.append(id: id, version: UInt64(version), lastActivity: 1)
        }
        #expect(journal.sessions(withRowsThrough: 1) == ["a"])
        #expect(journal.sessions(withRowsThrough: 3) == ["a", "b"])
        #expect(journal.sessions(withRowsThrough: 6) == ["a", "b", "c"])
        #expect(journal.rows["a"] == [1, 3, 6])
    }

    @Test func aFoldedSessionIsDueAgainOnlyByTheRowsItGainsAfterwards() {
        var journal = HistoryJournal(slots: 1024)
        for id in ["a", "b", "a"] { _ = journal.append(id: id, version: 1, lastActivity: 1) }
        journal.forget("a")
        journal.folded(through: 1)
        #expect(journal.sessions(withRowsThrough: 3) == ["b"])
        _ = journal.append(id: "a", version: 2, lastActivity: 1)
        #expect(journal.sessions(withRowsThrough: 3) == ["b"])
        #expect(journal.sessions(withRowsThrough: 4) == ["b", "a"])
        journal.forget("b")
        #expect(journal.sessions(withRowsThrough: 4) == ["a"])
    }

    @Test func aReopenedJournalFindsTheSameSessionsDue() {
        let rows: [(row: Int64, id: String, version: UInt64, lastActivity: Int64, bytes: Int)] = [
            (7, "a", 1, 10, 30), (8, "b", 1, 20, 2_000), (9, "a", 2, 30, 30), (10, "c", 1, 0, 30),
        ]
        var journal = HistoryJournal(slots: 16, rows: rows, lastRow: 12)
        #expect(journal.lastRow == 12, "the newest row, folded or not, numbers the next")
        #expect(journal.foldedThrough == 6)
        #expect(journal.largeRows == [8: 2_000])
        #expect(journal.sessions(withRowsThrough: 9) == ["a", "b"])
        #expect(journal.newest["a"]?.version == 2)
        #expect(journal.append(id: "b", version: 2, lastActivity: 5) == 13)
    }

    @Test func largeRowsAreCountedUntilTheirSessionIsFolded() {
        var journal = HistoryJournal(slots: 1024)
        _ = journal.append(id: "a", version: 1, lastActivity: 0, bytes: HistoryJournal.largeRowBytes)
        _ = journal.append(id: "a", version: 2, lastActivity: 0, bytes: 5_000)
        _ = journal.append(id: "b", version: 1, lastActivity: 0, bytes: 3_000)
        _ = journal.append(id: "a", version: 3, lastActivity: 0, bytes: 4_000)
        #expect(journal.largeRows == [2: 5_000, 3: 3_000, 4: 4_000], "a row of exactly the limit is not large")
        #expect(journal.largeBytes == 12_000)
        journal.forget("a", through: 2)
        #expect(journal.largeBytes == 7_000)
        journal.forget("a")
        journal.forget("b")
        #expect(journal.largeRows.isEmpty)
        #expect(journal.largeBytes == 0)
    }

    @Test func aJournalWithNothingUnfoldedHasAllItsSlotsFree() {
        var journal = HistoryJournal(slots: 4, rows: [], lastRow: 9)
        #expect(journal.foldedThrough == 9)
        #expect(journal.mustFold(beforeAppending: 4) == nil)
        #expect(journal.append(id: "a", version: 1, lastActivity: 0) == 10)
        #expect(journal.slot(of: 10) == 2)
    }

    @Test func rowsThatWouldTakeTheSlotOfAnUnfoldedOneMustWaitForItsFold() {
        var journal = HistoryJournal(slots: 4)
        for id in ["a", "b", "c"] { _ = journal.append(id: id, version: 1, lastActivity: 0) }
        #expect(journal.mustFold(beforeAppending: 1) == nil, "slot 0 is free")
        #expect(journal.mustFold(beforeAppending: 2) == 1, "row 5 would take row 1's slot")
        #expect(journal.mustFold(beforeAppending: 4) == 3)
        journal.forget("a", through: 1)
        journal.folded(through: 1)
        #expect(journal.mustFold(beforeAppending: 2) == nil)
        #expect(journal.sessions(withRowsThrough: 3) == ["b", "c"])
    }

    @Test func aSessionFoldedBeforeTheRowsItGainedInTheSameCommitKeepsThem() {
        var journal = HistoryJournal(slots: 1024)
        _ = journal.append(id: "a", version: 1, lastActivity: 0)
        _ = journal.append(id: "b", version: 1, lastActivity: 0)
        _ = journal.append(id: "c", version: 1, lastActivity: 0)
        // a was folded through row 1, then gained row 4, whose commit also appended b's row 5.
        _ = journal.append(id: "a", version: 2, lastActivity: 7)
        journal.forget("a", through: 1)
        #expect(journal.rows["a"] == [4])
        #expect(journal.newest["a"]?.version == 2)
        #expect(journal.isActive("a", since: 7))
        #expect(journal.sessions(withRowsThrough: 3) == ["b", "c"])
        _ = journal.append(id: "d", version: 1, lastActivity: 0)
        journal.forget("b")
        journal.forget("c")
        // Found by its new oldest row, in order before d's.
        #expect(journal.sessions(withRowsThrough: 4) == ["a"])
        #expect(journal.sessions(withRowsThrough: 5) == ["a", "d"])
    }

    @Test func manyFoldsKeepTheListShort() {
        var journal = HistoryJournal(slots: 1024)
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
        var journal = HistoryJournal(slots: 1024)
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
