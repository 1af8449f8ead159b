// Over 450 lines: one suite, whose tests share its fixtures; a split would repeat them.
import Foundation
import Locking
import ReactorHosting
import Synchronization
import TestSupport
import Testing

@testable import ReactorStoreSQLite

/// The SQLite store against real files in a temporary directory.
@Suite struct SQLiteSessionStoreTests {
    /// Removed once the test ends.
    private let scratch: ScratchDirectory

    init() throws {
        scratch = try ScratchDirectory("sqlite-store")
    }

    private func path(_ name: String = "sessions.sqlite") -> String { scratch.path(name) }

    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func aStoreIsServedByOneProcessAtATime() throws {
        let first = try SQLiteSessionStore(path: path(), historyCapacity: 8)
        _ = try first.commit([.create(id: "a", type: "counter", state: bytes(#"{"value":0}"#), lastActivity: 0)])
        #expect {
            _ = try SQLiteSessionStore(path: path(), historyCapacity: 8)
        } throws: { error in
            let message = (error as? SessionStoreError)?.message ?? ""
            return message.contains("\(path()) is in use by another process (pid \(getpid()))")
        }
        // The refused one changed nothing; once the first is closed, the store opens again.
        #expect(try first.load(id: "a")?.version == 0)
        first.close()
        let second = try SQLiteSessionStore(path: path(), historyCapacity: 8)
        defer { second.close() }
        #expect(try second.load(id: "a") != nil)
    }

    @Test func anotherNameForTheStoreFindsItInUse() throws {
        let first = try SQLiteSessionStore(path: path(), historyCapacity: 8)
        _ = try first.commit([.create(id: "a", type: "counter", state: bytes(#"{"value":0}"#), lastActivity: 0)])
        try FileManager.default.createDirectory(atPath: path("elsewhere"), withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: path("elsewhere/link.sqlite"), withDestinationPath: path())
        try FileManager.default.createSymbolicLink(atPath: path("directory-link"), withDestinationPath: scratch.path(""))
        try FileManager.default.linkItem(atPath: path(), toPath: path("elsewhere/hard.sqlite"))
        for (other, says) in [
            (path("elsewhere/link.sqlite"), "(pid \(getpid()))"), (path("directory-link/sessions.sqlite"), "(pid \(getpid()))"),
            (path("elsewhere/hard.sqlite"), "which opened it under another name (a hard link)"),
        ] {
            #expect {
                _ = try SQLiteSessionStore(path: other, historyCapacity: 8)
            } throws: { error in
                let message = (error as? SessionStoreError)?.message ?? ""
                return message.contains("\(other) is in use by another process") && message.contains(says)
            }
        }
        // Nothing beside the hard link was made: SQLite never opened it.
        #expect(!FileManager.default.fileExists(atPath: path("elsewhere/hard.sqlite-wal")))
        #expect(try first.load(id: "a")?.version == 0)
        first.close()
        let linked = try SQLiteSessionStore(path: path("elsewhere/link.sqlite"), historyCapacity: 8)
        defer { linked.close() }
        #expect(try linked.load(id: "a") != nil)
    }

    @Test func closingLetsGoOfTheStoreThoughAChildProcessHoldsACopyOfItsLock() throws {
        let first = try SQLiteSessionStore(path: path(), historyCapacity: 8)
        // A process started meanwhile holds a copy of every descriptor until it executes its
        // program: this child never does, for 0.3 s (it calls only what is safe after fork).
        let child = fork()
        if child == 0 {
            usleep(300_000)
            _exit(0)
        }
        #expect(child > 0)
        defer {
            var status: Int32 = 0
            waitpid(child, &status, 0)
        }
        first.close()
        let second = try SQLiteSessionStore(path: path(), historyCapacity: 8)
        second.close()
    }

    @Test func idempotencyKeysOutliveTheirActionsAndLeaveWithTheWindowOrTheSession() throws {
        do {
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 8)
            _ = try store.commit([.create(id: "k", type: "counter", state: bytes("0"), lastActivity: 0)])
            // Accepted and settled in one batch: the action is never written, its key is.
            _ = try store.commit([
                .accept(id: "k", seq: 1, action: bytes(#""increase""#), key: RememberedKey(key: "one", seq: 1, digest: 7)),
                .settle(id: "k", seq: 1),
            ])
            _ = try store.commit(
                (2...1088).map {
                    .accept(
                        id: "k", seq: UInt64($0), action: bytes(#""increase""#),
                        key: RememberedKey(key: "key \($0)", seq: UInt64($0), digest: 7))
                })
            store.close()
        }
        let reopened = try SQLiteSessionStore(path: path(), historyCapacity: 8)
        defer { reopened.close() }
        let keys = try #require(try reopened.load(id: "k")).rememberedKeys
        // At seq 1088 the keys of seq 64 and before left the window.
        #expect(keys.count == 1024)
        #expect(keys.map(\.seq).min() == 65)
        #expect(keys.first { $0.seq == 1088 } == RememberedKey(key: "key 1088", seq: 1088, digest: 7))
        _ = try reopened.commit([.delete(id: "k")])
        _ = try reopened.commit([.create(id: "k", type: "counter", state: bytes("0"), lastActivity: 0)])
        #expect(try reopened.load(id: "k")?.rememberedKeys.isEmpty == true)
    }

    @Test func textIsStoredWholeAndSubjectsAreCountedByTheirBytes() throws {
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 8)
        defer { store.close() }
        // A NUL does not end a text, and strings Unicode calls equivalent stay two.
        let subjects = ["bob", "bob\u{0}", "bob\u{0}\u{0}", "caf\u{E9}", "cafe\u{301}", "caf\u{E9}"]
        for (index, subject) in subjects.enumerated() {
            let creation = InstanceCreation(context: CreationContext(subject: subject)).json
            _ = try store.commit([.create(id: "s\(index)", type: "counter", state: bytes("0"), lastActivity: 0, creation: creation)])
        }
        for subject in Set(subjects.map { Array($0.utf8) }).map({ String(decoding: $0, as: UTF8.self) }) {
            #expect(try store.count(owner: subject) == subjects.count { $0.utf8.elementsEqual(subject.utf8) }, "\(Array(subject.utf8))")
        }
        let key = RememberedKey(key: "k\u{0}ey \u{212A}", seq: 1, digest: 7)
        _ = try store.commit([.accept(id: "s0", seq: 1, action: bytes(#""increase""#), key: key), .settle(id: "s0", seq: 1)])
        #expect(try store.load(id: "s0")?.rememberedKeys == [key])
    }

    @Test func whatIsCommittedLoadsBackAfterReopening() throws {
        do {
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 8)
            let stale = try store.commit([
                .create(id: "a", type: "counter", state: bytes(#"{"value":0}"#), lastActivity: 100),
                .accept(id: "a", seq: 1, action: bytes(#""increase""#)),
                .version(id: "a", version: 1, state: bytes(#"{"value":1}"#), startedThrough: 1, producedBy: 1, lastActivity: 110),
                .accept(id: "a", seq: 2, action: bytes(#""decrease""#)),
            ])
            #expect(stale.isEmpty)
            _ = try store.commit([
                .settle(id: "a", seq: 1),
                .version(id: "a", version: 2, state: bytes(#"{"value":2}"#), startedThrough: 2, producedBy: 2, lastActivity: 120),
            ])
            store.close()
        }
        let reopened = try SQLiteSessionStore(path: path(), historyCapacity: 8)
        let loaded = try #require(try reopened.load(id: "a"))
        #expect(loaded.type == "counter")
        #expect(loaded.version == 2)
        #expect(loaded.state == bytes(#"{"value":2}"#))
        #expect(loaded.startedThrough == 2)
        #expect(loaded.lastActivity == 120)
        #expect(loaded.history.map(\.version) == [0, 1, 2])
        #expect(loaded.history.map(\.state) == [#"{"value":0}"#, #"{"value":1}"#, #"{"value":2}"#].map(bytes))
        #expect(loaded.pendingActions == [PendingAction(seq: 2, action: bytes(#""decrease""#), producedVersions: 1)])
        #expect(try reopened.load(id: "b") == nil)
        #expect(try reopened.contains(id: "a"))
        #expect(try !reopened.contains(id: "b"))
    }

    @Test func historyKeepsItsCapacityAndAnActionAcceptedAndSettledInOneBatchIsNeverWritten() throws {
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 3)
        var writes: [SessionWrite] = [.create(id: "a", type: "t", state: bytes("0"), lastActivity: 0)]
        for version in 1...10 as ClosedRange<UInt64> {
            writes.append(.accept(id: "a", seq: version, action: bytes("\(version)")))
            writes.append(
                .version(id: "a", version: version, state: bytes("\(version)"), startedThrough: version, producedBy: 0, lastActivity: 0))
            writes.append(.settle(id: "a", seq: version))
        }
        _ = try store.commit(writes)
        let loaded = try #require(try store.load(id: "a"))
        #expect(loaded.history.map(\.version) == [8, 9, 10])
        #expect(loaded.pendingActions.isEmpty)
        #expect(loaded.version == 10)
    }

    @Test func aStaleVersionIsRefusedAndReported() throws {
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 4)
        _ = try store.commit([
            .create(id: "a", type: "t", state: bytes("0"), lastActivity: 0),
            .version(id: "a", version: 5, state: bytes("5"), startedThrough: 1, producedBy: 0, lastActivity: 0),
        ])
        let stale = try store.commit([.version(id: "a", version: 3, state: bytes("3"), startedThrough: 1, producedBy: 0, lastActivity: 0)])
        #expect(stale == ["a"])
        #expect(try store.load(id: "a")?.version == 5)
        // Versions 2 through 5 are kept (capacity 4); the refused version 3 is not among them.
        #expect(try store.load(id: "a")?.history.map(\.version) == [5])
    }

    /// The version the `sessions` table itself holds for `id`, read from the file.
    private func rowVersion(of id: String) throws -> UInt64? {
        let connection = try SQLiteConnection(path: path(), create: false)
        let statement = try connection.statement("SELECT version FROM sessions WHERE id = ?")
        defer { statement.reset() }
        statement.bind(1, id)
        return try statement.next() ? statement.uint64(0) : nil
    }

    @Test func aCommitAppendsToTheJournalAndASessionsRowCatchesUpWhenItsRowsAreFolded() throws {
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 4, journalWindow: 3)
        _ = try store.commit([
            .create(id: "a", type: "t", state: bytes("0"), lastActivity: 0),
            .create(id: "b", type: "t", state: bytes("0"), lastActivity: 0),
        ])
        try versions(1...2, of: ["a"], on: store)
        #expect(try rowVersion(of: "a") == 0, "a commit writes the journal, not the session's row")
        let loaded = try #require(try store.load(id: "a"))
        #expect(loaded.version == 2)
        #expect(loaded.state == bytes("a2"))
        #expect(loaded.startedThrough == 2)
        #expect(loaded.lastActivity == 2)
        // Past the window, a's rows are folded: its row is brought up to them.
        try versions(1...3, of: ["b"], on: store)
        #expect(try rowVersion(of: "a") == 2)
        #expect(try store.load(id: "a")?.state == bytes("a2"))
    }

    @Test func aSessionReopenedFromItsJournalRowsIsAsCommitted() throws {
        do {
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 4)
            _ = try store.commit([.create(id: "a", type: "t", state: bytes("0"), lastActivity: 0)])
            try versions(1...3, of: ["a"], on: store)
            // Refused against the journal's newest version, not the row's.
            let stale = try store.commit([
                .version(id: "a", version: 2, state: bytes("x"), startedThrough: 9, producedBy: 0, lastActivity: 9)
            ])
            #expect(stale == ["a"])
        }
        // As a crash leaves it: the store was never closed.
        let reopened = try SQLiteSessionStore(path: path(), historyCapacity: 4)
        let loaded = try #require(try reopened.load(id: "a"))
        #expect(loaded.version == 3)
        #expect(loaded.state == bytes("a3"))
        #expect(loaded.startedThrough == 3)
        #expect(loaded.history.map(\.version) == [0, 1, 2, 3])
        #expect(
            try reopened.commit([
                .version(id: "a", version: 3, state: bytes("x"), startedThrough: 9, producedBy: 0, lastActivity: 9)
            ]) == ["a"])
    }

    @Test func aSessionActiveOnlyInItsJournalRowsIsNotIdle() throws {
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 4)
        _ = try store.commit([
            .create(id: "a", type: "t", state: bytes("0"), lastActivity: 0),
            .create(id: "b", type: "t", state: bytes("0"), lastActivity: 0),
        ])
        try versions(1_000...1_000, of: ["a"], on: store)
        #expect(try store.deleteIdle(before: 500, excluding: []) == ["b"])
        #expect(try store.load(id: "a")?.version == 1_000)
        #expect(try store.deleteIdle(before: 2_000, excluding: []) == ["a"])
        #expect(try store.load(id: "a") == nil)
    }

    @Test func deletedSessionsStayDeletedAndWritesForThemAreIgnored() throws {
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 4)
        _ = try store.commit([
            .create(id: "a", type: "t", state: bytes("0"), lastActivity: 0),
            .accept(id: "a", seq: 1, action: bytes("1")),
            .delete(id: "a"),
            .version(id: "a", version: 1, state: bytes("1"), startedThrough: 1, producedBy: 0, lastActivity: 0),
            .accept(id: "a", seq: 2, action: bytes("2")),
        ])
        #expect(try store.load(id: "a") == nil)
        #expect(try !store.contains(id: "a"))
    }

    @Test func idleSessionsExpireExceptThoseExcluded() throws {
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 4)
        _ = try store.commit([
            .create(id: "old", type: "t", state: bytes("0"), lastActivity: 10),
            .create(id: "live", type: "t", state: bytes("0"), lastActivity: 10),
            .create(id: "new", type: "t", state: bytes("0"), lastActivity: 1000),
            .touch(id: "new", lastActivity: 2000),
        ])
        #expect(try store.deleteIdle(before: 500, excluding: ["live"]).count == 1)
        #expect(try store.load(id: "old") == nil)
        #expect(try store.load(id: "live") != nil)
        #expect(try store.load(id: "new")?.lastActivity == 2000)
    }

    @Test func aFileThatIsNotADatabaseIsRefusedAndLeftUntouched() throws {
        let original = Data("these are somebody's notes, not a database\n".utf8)
        try original.write(to: URL(fileURLWithPath: path()))
        let error = #expect(throws: SessionStoreError.self) { try SQLiteSessionStore(path: path(), historyCapacity: 4) }
        #expect(error?.kind == .corrupt)
        #expect(error?.message.contains(path()) == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path())) == original)
    }

    @Test func aDamagedDatabaseIsRefusedAndLeftUntouched() throws {
        do {
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 4)
            _ = try store.commit([.create(id: "a", type: "t", state: bytes("0"), lastActivity: 0)])
            store.close()
        }
        // Keep SQLite's header, wreck the rest of the first page (the schema).
        var damaged = try Data(contentsOf: URL(fileURLWithPath: path()))
        for index in 100..<min(damaged.count, 4096) { damaged[index] = 0xA5 }
        try damaged.write(to: URL(fileURLWithPath: path()))
        let error = #expect(throws: SessionStoreError.self) { try SQLiteSessionStore(path: path(), historyCapacity: 4) }
        #expect(error?.kind == .corrupt)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path())) == damaged)
    }

    @Test func anotherApplicationsDatabaseIsRefusedAndLeftUntouched() throws {
        let other = Process()
        other.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        other.arguments = [
            "python3", "-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('create table notes(x)'); c.commit()", path(),
        ]
        try other.run()
        other.waitUntilExit()
        let before = try Data(contentsOf: URL(fileURLWithPath: path()))
        let error = #expect(throws: SessionStoreError.self) { try SQLiteSessionStore(path: path(), historyCapacity: 4) }
        #expect(error?.message.contains("not a session store") == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path())) == before)
    }

    @Test func aPathThatCannotBeCreatedNamesItself() throws {
        let file = path("plain-file")
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        let target = file + "/sessions.sqlite"
        let error = #expect(throws: SessionStoreError.self) { try SQLiteSessionStore(path: target, historyCapacity: 4) }
        #expect(error?.kind == .unavailable)
        #expect(error?.message.contains(target) == true)
    }

    @Test func aFullStoreFailsWholeBatchesAndTakesThemAgainOnceSpaceIsFreed() throws {
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 4, maxPageCount: 40)
        let big = [UInt8](repeating: UInt8(ascii: "x"), count: 3000)
        var created = 0
        var fullError: SessionStoreError?
        while fullError == nil && created < 1000 {
            do {
                _ = try store.commit([.create(id: "s\(created)", type: "t", state: big, lastActivity: 0)])
                created += 1
            } catch {
                fullError = error
            }
        }
        #expect(fullError?.kind == .full)
        // The failed batch left nothing behind, and the store still reads.
        #expect(try store.load(id: "s\(created)") == nil)
        #expect(try store.count() == created)
        // Its size on disk is the file's and its log's, each past the data it holds.
        let sizes = try [store.path, store.path + "-wal"].map { try FileManager.default.attributesOfItem(atPath: $0)[.size] as! Int }
        #expect(try store.diskUsage() == sizes.reduce(0, +))
        #expect(sizes.reduce(0, +) > created * big.count)
        // Freeing space lets the same batch commit.
        _ = try store.commit((0..<created / 2).map { .delete(id: "s\($0)") })
        _ = try store.commit([.create(id: "s\(created)", type: "t", state: big, lastActivity: 0)])
        #expect(try store.load(id: "s\(created)")?.state == big)
    }

    /// One version of `id` per commit, `a` and `b` in turn, through a journal of `window` rows.
    private func versions(_ range: ClosedRange<UInt64>, of ids: [String], on store: SQLiteSessionStore) throws {
        for version in range {
            _ = try store.commit(
                ids.map { id in
                    .version(
                        id: id, version: version, state: bytes("\(id)\(version)"), startedThrough: version, producedBy: version,
                        lastActivity: Int64(version))
                })
        }
    }

    private func expectHistory(
        of id: String, through version: UInt64, capacity: UInt64, in store: SQLiteSessionStore,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let loaded = try #require(try store.load(id: id), sourceLocation: sourceLocation)
        let kept = Array((version + 1 > capacity ? version + 1 - capacity : 0)...version)
        #expect(loaded.version == version, sourceLocation: sourceLocation)
        #expect(loaded.state == bytes("\(id)\(version)"), sourceLocation: sourceLocation)
        #expect(loaded.history.map(\.version) == kept, sourceLocation: sourceLocation)
        #expect(loaded.history.map(\.state) == kept.map { $0 == 0 ? bytes("0") : bytes("\(id)\($0)") }, sourceLocation: sourceLocation)
        #expect(loaded.history.map(\.producedBy) == kept, sourceLocation: sourceLocation)
    }

    @Test(arguments: [["a", "b"], ["a", "b", "c", "d", "e", "f", "g"]])
    func versionsFoldFromTheJournalIntoTheHistoryAndLoadOnceWhereverTheyAre(ids: [String]) throws {
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 5, journalWindow: 3)
        _ = try store.commit(ids.map { .create(id: $0, type: "t", state: bytes("0"), lastActivity: 0) })
        for version in 1...20 as ClosedRange<UInt64> {
            try versions(version...version, of: ids, on: store)
            for id in ids { try expectHistory(of: id, through: version, capacity: 5, in: store) }
            // The window, and at most the rows of one commit beyond it, wait to be folded; the
            // table never holds more rows than its slots (twice the window).
            #expect(unfoldedRows(in: store) <= 3 + ids.count)
            #expect(try store.rowCount(of: "journal") <= 6)
        }
        // Folding trims the history to what it keeps.
        #expect(try store.rowCount(of: "history") <= ids.count * (5 + 3))
    }

    @Test func loadsFromSeveralThreadsWhileCommitsFoldSeeWholeConsecutiveHistories() throws {
        let ids = ["a", "b", "c", "d"]
        let capacity: UInt64 = 5
        let store = try SQLiteSessionStore(path: path(), historyCapacity: Int(capacity), journalWindow: 3)
        _ = try store.commit(ids.map { .create(id: $0, type: "t", state: bytes("0"), lastActivity: 0) })
        let last: UInt64 = 300
        let writing = Locked(true)
        let problems = Locked<[String]>([])
        let loads = Atomic<Int>(0)
        let readersDone = DispatchSemaphore(value: 0)
        for reader in 0..<SQLiteSessionStore.readerConnections {
            Thread {
                defer { readersDone.signal() }
                var turn = reader
                while writing.withLock({ $0 }) {
                    let id = ids[turn % ids.count]
                    turn += 1
                    do {
                        guard let loaded = try store.load(id: id) else { throw SessionStoreError(.corrupt, "\(id) missing") }
                        let version = loaded.version
                        let kept = Array((version + 1 > capacity ? version + 1 - capacity : 0)...version)
                        let states = kept.map { $0 == 0 ? self.bytes("0") : self.bytes("\(id)\($0)") }
                        if loaded.history.map(\.version) != kept || loaded.history.map(\.state) != states
                            || loaded.state != states.last
                        {
                            problems.withLock { $0.append("\(id) at \(version): \(loaded.history.map(\.version))") }
                        }
                        loads.add(1, ordering: .relaxed)
                    } catch {
                        problems.withLock { $0.append("\(error)") }
                    }
                }
            }.start()
        }
        try versions(1...last, of: ids, on: store)
        writing.withLock { $0 = false }
        for _ in 0..<SQLiteSessionStore.readerConnections { readersDone.wait() }
        #expect(problems.withLock { $0 }.isEmpty, "\(problems.withLock { $0.prefix(5) })")
        #expect(loads.load(ordering: .relaxed) > 0)
        for id in ids { try expectHistory(of: id, through: last, capacity: capacity, in: store) }
    }

    @Test func aReopenedStoreFoldsWhatItsJournalStillHeldAndLoadsEachVersionOnce() throws {
        do {
            // No fold: everything stays in the journal, as a crash would leave it.
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 6, journalWindow: 1000)
            _ = try store.commit([.create(id: "a", type: "t", state: bytes("0"), lastActivity: 0)])
            try versions(1...4, of: ["a"], on: store)
        }
        do {
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 6, journalWindow: 2)
            try expectHistory(of: "a", through: 4, capacity: 6, in: store)
            // Folds, leaving rows of the folded session in the journal until the range passes them.
            try versions(5...9, of: ["a"], on: store)
            try expectHistory(of: "a", through: 9, capacity: 6, in: store)
        }
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 6, journalWindow: 2)
        try expectHistory(of: "a", through: 9, capacity: 6, in: store)
        try versions(10...12, of: ["a"], on: store)
        try expectHistory(of: "a", through: 12, capacity: 6, in: store)
    }

    @Test func aCommitFoldsNoMoreThanItsShareAndTheRestWaitsInTheJournal() throws {
        do {
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 8, journalWindow: 1000)
            _ = try store.commit(["a", "b", "c", "d"].map { .create(id: $0, type: "t", state: bytes("0"), lastActivity: 0) })
            try versions(1...10, of: ["a", "b", "c"], on: store)
        }
        // Thirty rows (a1 b1 c1 a2 ... c10), all due once the window is 2; a commit of one row may
        // fold two rows' worth, one session at a time: a's ten rows, then b's, then c's (d1, d2,
        // d3 added meanwhile), then d's four.
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 8, journalWindow: 2)
        for (version, rowsLeft) in zip(1...4 as ClosedRange<UInt64>, [21, 12, 3, 0]) {
            try versions(version...version, of: ["d"], on: store)
            #expect(unfoldedRows(in: store) == rowsLeft)
            for id in ["a", "b", "c"] { try expectHistory(of: id, through: 10, capacity: 8, in: store) }
            try expectHistory(of: "d", through: version, capacity: 8, in: store)
        }
    }

    @Test func aSessionWithManyJournalRowsLoadsTheVersionsItKeepsAndFoldsOnlyThose() throws {
        do {
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 3, journalWindow: 1000)
            _ = try store.commit(["a", "b"].map { .create(id: $0, type: "t", state: bytes("0"), lastActivity: 0) })
            try versions(1...40, of: ["a"], on: store)
            #expect(try store.rowCount(of: "journal") == 40)
            try expectHistory(of: "a", through: 40, capacity: 3, in: store)
        }
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 3, journalWindow: 2)
        try versions(1...1, of: ["b"], on: store)
        #expect(unfoldedRows(in: store) == 1, "a's forty rows are folded")
        try expectHistory(of: "a", through: 40, capacity: 3, in: store)
        // Into a chunk of the three versions kept: the rows before them were not copied.
        let first = try SQLiteConnection(path: path(), create: false).statement(
            "SELECT min(first_version), count(*) FROM history WHERE id = 'a'")
        defer { first.reset() }
        #expect(try first.next())
        #expect(first.int64(0) == 38)
        #expect(first.int64(1) == 1)
    }

    /// The journal rows the store has not folded yet.
    private func unfoldedRows(in store: SQLiteSessionStore) -> Int {
        store.journal.withLock { $0.rows.values.reduce(0) { $0 + $1.count } }
    }

    @Test func aCommitOfMoreSessionsThanTheJournalHasFreeSlotsFoldsFirstWhatItWouldWriteOver() throws {
        // Window 2: four slots. Each commit brings six sessions' versions, so each first folds
        // the rows in the slots it takes, some of them its own sessions' rows of the commit before.
        let ids = ["a", "b", "c", "d", "e", "f"]
        do {
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 4, journalWindow: 2)
            _ = try store.commit(ids.map { .create(id: $0, type: "t", state: bytes("0"), lastActivity: 0) })
            for version in 1...9 as ClosedRange<UInt64> {
                try versions(version...version, of: ids, on: store)
                for id in ids { try expectHistory(of: id, through: version, capacity: 4, in: store) }
                #expect(try store.rowCount(of: "journal") <= 4)
            }
        }
        // As a crash leaves it: what the journal still held unfolded is found again.
        let reopened = try SQLiteSessionStore(path: path(), historyCapacity: 4, journalWindow: 2)
        for id in ids { try expectHistory(of: id, through: 9, capacity: 4, in: reopened) }
        try versions(10...12, of: ids, on: reopened)
        for id in ids { try expectHistory(of: id, through: 12, capacity: 4, in: reopened) }
    }

    @Test func largeStatesLeaveTheJournalWhenFoldedAndAreFoldedOnceTheirBytesPassTheBudget() throws {
        // Window 16: 32 slots, and 16 KiB of unfolded large rows at most, which two sessions'
        // 6 KB states pass after two commits, long before their rows fill the window.
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 4, journalWindow: 16)
        let ids = ["a", "b"]
        _ = try store.commit(ids.map { .create(id: $0, type: "t", state: bytes("0"), lastActivity: 0) })
        func state(_ id: String, _ version: UInt64) -> [UInt8] {
            version == 0 ? bytes("0") : bytes("\(id)\(version)" + String(repeating: "x", count: 6_000))
        }
        for version in 1...12 as ClosedRange<UInt64> {
            _ = try store.commit(
                ids.map { id in
                    .version(
                        id: id, version: version, state: state(id, version), startedThrough: version, producedBy: version,
                        lastActivity: Int64(version))
                })
            let (largeBytes, unfoldedLarge) = store.journal.withLock { ($0.largeBytes, $0.largeRows.count) }
            // The budget, and at most one commit's rows beyond it.
            #expect(largeBytes <= 16 * 1_024 + 2 * 6_100)
            // Every large row the table still holds is an unfolded one.
            #expect(try largeJournalRows() == unfoldedLarge)
            for id in ids {
                let loaded = try #require(try store.load(id: id))
                #expect(loaded.version == version)
                let kept = (version > 3 ? version - 3 : 0)...version
                #expect(loaded.history.map(\.version) == Array(kept))
                #expect(loaded.history.map(\.state) == kept.map { state(id, $0) })
            }
        }
    }

    /// The journal rows over ``HistoryJournal/largeRowBytes``, read from the file.
    private func largeJournalRows() throws -> Int {
        let statement = try SQLiteConnection(path: path(), create: false).statement(
            "SELECT count(*) FROM journal WHERE length(versions) > \(HistoryJournal.largeRowBytes)")
        defer { statement.reset() }
        _ = try statement.next()
        return Int(statement.int64(0))
    }

    @Test func aJournalKeepsTheSlotsItWasMadeWithAndAWiderWindowIsCutToHalfOfThem() throws {
        do {
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 4, journalWindow: 3)
            _ = try store.commit([.create(id: "a", type: "t", state: bytes("0"), lastActivity: 0)])
            try versions(1...4, of: ["a"], on: store)
        }
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 4, journalWindow: 1000)
        #expect(store.journal.withLock { $0.slots } == 6)
        #expect(store.journalWindow == 3)
        try versions(5...40, of: ["a"], on: store)
        #expect(try store.rowCount(of: "journal") <= 6)
        try expectHistory(of: "a", through: 40, capacity: 4, in: store)
    }

    private func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    @Test func theLogIsCopiedIntoTheDatabaseBesideTheCommitsAndStartsOverOnceLong() throws {
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 4)
        _ = try store.commit([.create(id: "a", type: "t", state: bytes("0"), lastActivity: 0)])
        let sizeBefore = fileSize(path())
        // More pages than a pass of the checkpoint thread waits for, fewer than the writer's own
        // (a commit of one session's version appends to the journal: a page or two).
        try versions(1...800, of: ["a"], on: store)
        // The thread's pass copies pages into the database file, while no commit is running.
        let deadline = Date().addingTimeInterval(10)
        while fileSize(path()) <= sizeBefore && Date() < deadline { usleep(5_000) }
        #expect(fileSize(path()) > sizeBefore)
        try versions(801...2500, of: ["a"], on: store)
        let frame = 4096 + 24
        #expect(fileSize(path() + "-wal") <= (WALCheckpointer.framesBeforeRestart + 2 * WALCheckpointer.framesPerPass) * frame)
        try expectHistory(of: "a", through: 2500, capacity: 4, in: store)
    }

    @Test func aDeletedSessionLeavesNothingInTheJournalOrTheHistory() throws {
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 4, journalWindow: 2)
        _ = try store.commit(["a", "b"].map { .create(id: $0, type: "t", state: bytes("0"), lastActivity: 0) })
        try versions(1...3, of: ["a", "b"], on: store)
        _ = try store.commit([.delete(id: "a")])
        try versions(4...8, of: ["b"], on: store)
        #expect(try store.load(id: "a") == nil)
        #expect(try store.rowCount(of: "history", id: "a") == 0)
        #expect(try store.rowCount(of: "journal", id: "a") == 0)
        try expectHistory(of: "b", through: 8, capacity: 4, in: store)
    }

    /// A store holding session "a", closed, then changed by `sql` as an earlier build would
    /// have left it.
    private func storeWithOneSession(changedBy sql: String) throws {
        do {
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 4)
            _ = try store.commit([.create(id: "a", type: "t", state: bytes("0"), lastActivity: 0)])
            store.close()
        }
        let connection = try SQLiteConnection(path: path(), create: false)
        try connection.execute(sql)
    }

    @Test func aStoreOfTheFirstSchemaIsUpgradedInPlaceWithItsSessions() throws {
        // As the first schema left it: no journal, schema 1.
        try storeWithOneSession(changedBy: "DROP TABLE journal; UPDATE meta SET value = '1' WHERE key = 'schema'")
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 4, journalWindow: 2)
        try versions(1...6, of: ["a"], on: store)
        try expectHistory(of: "a", through: 6, capacity: 4, in: store)
        #expect(try store.schema() == SQLiteSchema.version)
    }

    /// Schema 3's journal, numbered rows carrying the session's newest version, and schema 2's,
    /// whose rows carry only history (the session's row as new as they are).
    @Test(arguments: [3, 2])
    func aNumberedJournalOfAnEarlierSchemaBecomesARingAndKeepsEveryVersion(schema: Int) throws {
        do {
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 8, journalWindow: 1000)
            _ = try store.commit([.create(id: "a", type: "t", state: bytes("0"), lastActivity: 0)])
            try versions(1...5, of: ["a"], on: store)
            store.close()
        }
        let connection = try SQLiteConnection(path: path(), create: false)
        try connection.execute(
            """
            CREATE TABLE numbered(
                row INTEGER PRIMARY KEY, id TEXT NOT NULL, first_version INTEGER NOT NULL, last_version INTEGER NOT NULL,
                versions BLOB NOT NULL, started_through INTEGER, last_activity INTEGER);
            INSERT INTO numbered SELECT row + 100, id, first_version, last_version, versions, started_through, last_activity
            FROM journal;
            DROP TABLE journal;
            ALTER TABLE numbered RENAME TO journal;
            DELETE FROM meta WHERE key = 'journal_slots';
            UPDATE meta SET value = '\(schema)' WHERE key = 'schema';
            """)
        if schema == 2 {
            try connection.execute(
                """
                UPDATE sessions SET version = 5, state = CAST('a5' AS BLOB), started_through = 5, last_activity = 5;
                UPDATE journal SET started_through = NULL, last_activity = NULL;
                """)
        }
        do {
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 8, journalWindow: 2)
            #expect(try store.schema() == SQLiteSchema.version)
            // Schema 2's rows went into the history as they were.
            #expect(unfoldedRows(in: store) == (schema == 3 ? 5 : 0))
            #expect(store.journal.withLock { $0.slots } == (schema == 3 ? 10 : 4), "room for twice the rows it held")
            try expectHistory(of: "a", through: 5, capacity: 8, in: store)
            try versions(6...12, of: ["a"], on: store)
            try expectHistory(of: "a", through: 12, capacity: 8, in: store)
        }
        let reopened = try SQLiteSessionStore(path: path(), historyCapacity: 8, journalWindow: 2)
        try expectHistory(of: "a", through: 12, capacity: 8, in: reopened)
        #expect(try reopened.rowCount(of: "journal") <= 10)
    }

    @Test func aSessionIsMarkedPublishedAheadUntilItsReleaseAcrossReopening() throws {
        do {
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 4)
            _ = try store.commit([
                .create(id: "a", type: "t", state: bytes("0"), lastActivity: 0, publishingAhead: true),
                .create(id: "b", type: "t", state: bytes("0"), lastActivity: 0),
                .create(id: "c", type: "t", state: bytes("0"), lastActivity: 0),
            ])
            _ = try store.commit([.publishingAhead(id: "b")])
            #expect(try store.load(id: "a")?.publishedAhead == true)
            #expect(try store.load(id: "b")?.publishedAhead == true)
            #expect(try store.load(id: "c")?.publishedAhead == false)
            _ = try store.commit([
                .version(id: "a", version: 1, state: bytes("1"), startedThrough: 0, producedBy: 0, lastActivity: 1),
                .release(id: "b"),
            ])
            store.close()
        }
        let reopened = try SQLiteSessionStore(path: path(), historyCapacity: 4)
        #expect(try reopened.load(id: "a")?.publishedAhead == true)
        #expect(try reopened.load(id: "b")?.publishedAhead == false)
        #expect(try reopened.load(id: "c")?.publishedAhead == false)
    }

    @Test func aStoreMadeBeforeTheMarkGainsItsColumnAndKeepsItsSessions() throws {
        try storeWithOneSession(changedBy: "ALTER TABLE sessions DROP COLUMN published_ahead")
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 4)
        let loaded = try #require(try store.load(id: "a"))
        #expect(!loaded.publishedAhead)
        #expect(loaded.state == bytes("0"))
        _ = try store.commit([.publishingAhead(id: "a")])
        #expect(try store.load(id: "a")?.publishedAhead == true)
        #expect(try store.schema() == SQLiteSchema.version)
    }

    @Test func attemptsAreCountedOnActionRecordsAcrossReopeningAndFollowARenumberedOne() throws {
        do {
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 4)
            _ = try store.commit([
                .create(id: "a", type: "t", state: bytes("0"), lastActivity: 0),
                .accept(id: "a", seq: 1, action: bytes(#""x""#)),
                .accept(id: "a", seq: 2, action: bytes(#""y""#)),
            ])
            _ = try store.commit([.attempt(id: "a", seq: 1)])
            // As an activation renumbers action 2: its attempt goes with its new record. An attempt
            // for a record that is not stored, or a session that is not, changes nothing.
            _ = try store.commit([
                .attempt(id: "a", seq: 1), .accept(id: "a", seq: 3, action: bytes(#""y""#)), .attempt(id: "a", seq: 3),
                .settle(id: "a", seq: 2), .attempt(id: "a", seq: 9), .attempt(id: "b", seq: 1),
            ])
            store.close()
        }
        let reopened = try SQLiteSessionStore(path: path(), historyCapacity: 4)
        defer { reopened.close() }
        #expect(
            try reopened.load(id: "a")?.pendingActions == [
                PendingAction(seq: 1, action: bytes(#""x""#), attempts: 2), PendingAction(seq: 3, action: bytes(#""y""#), attempts: 1),
            ])
        #expect(try reopened.load(id: "b") == nil)
        // A process that stops cleanly takes back the attempts it counted: one each, never below
        // none, and nothing for a record that is not stored (settled meanwhile).
        try reopened.withdrawAttempts(["a": [1, 3, 2, 9], "b": [1]])
        try reopened.withdrawAttempts(["a": [3]])
        #expect(
            try reopened.load(id: "a")?.pendingActions == [
                PendingAction(seq: 1, action: bytes(#""x""#), attempts: 1), PendingAction(seq: 3, action: bytes(#""y""#), attempts: 0),
            ])
    }

    /// As an activation writes it when the action it sends again takes the sequence of one it
    /// reports (stored by an earlier build, no longer decodable) and settles in the same batch.
    @Test func aSequenceSettledAndThenAcceptedAgainInOneBatchHoldsTheNewRecord() throws {
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 4)
        defer { store.close() }
        _ = try store.commit([
            .create(id: "a", type: "t", state: bytes("0"), lastActivity: 0),
            .accept(id: "a", seq: 1, action: bytes(#""reset""#)), .accept(id: "a", seq: 2, action: bytes(#""increase""#)),
        ])
        _ = try store.commit([
            .settle(id: "a", seq: 1), .accept(id: "a", seq: 1, action: bytes(#""increase""#)), .attempt(id: "a", seq: 1),
            .settle(id: "a", seq: 2),
        ])
        #expect(try store.load(id: "a")?.pendingActions == [PendingAction(seq: 1, action: bytes(#""increase""#), attempts: 1)])
        // Accepted and settled in one batch, after a settle of its sequence's stored record: gone.
        _ = try store.commit([
            .settle(id: "a", seq: 1), .accept(id: "a", seq: 1, action: bytes(#""x""#)), .settle(id: "a", seq: 1),
        ])
        #expect(try store.load(id: "a")?.pendingActions.isEmpty == true)
    }

    @Test func aStoreMadeBeforeAttemptsGainsTheirColumnAndKeepsItsPendingActions() throws {
        do {
            let store = try SQLiteSessionStore(path: path(), historyCapacity: 4)
            _ = try store.commit([
                .create(id: "a", type: "t", state: bytes("0"), lastActivity: 0), .accept(id: "a", seq: 1, action: bytes(#""x""#)),
            ])
            store.close()
        }
        try SQLiteConnection(path: path(), create: false).execute("ALTER TABLE actions DROP COLUMN attempts")
        let store = try SQLiteSessionStore(path: path(), historyCapacity: 4)
        defer { store.close() }
        #expect(try store.load(id: "a")?.pendingActions == [PendingAction(seq: 1, action: bytes(#""x""#), attempts: 0)])
        _ = try store.commit([.attempt(id: "a", seq: 1)])
        #expect(try store.load(id: "a")?.pendingActions.map(\.attempts) == [1])
        #expect(try store.schema() == SQLiteSchema.version)
    }
}
