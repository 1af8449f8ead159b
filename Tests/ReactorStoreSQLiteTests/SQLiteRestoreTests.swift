import Foundation
import ReactorHosting
import TestSupport
import Testing

@testable import ReactorStoreSQLite

/// Restores: the backup takes the store's place, the replaced store is kept beside it, and a
/// refused restore changes nothing.
@Suite struct SQLiteRestoreTests {
    /// Removed once the test ends.
    private let scratch: ScratchDirectory
    private var directory: URL { scratch.url }
    private let backup: String

    init() throws {
        scratch = try ScratchDirectory("sqlite-restore")
        backup = scratch.path("backup.sqlite")
        try writeStore(at: backup, counters: [("b", 7)])
    }

    private func path(_ name: String) -> String { scratch.path(name) }

    @Test func aStoreThatDoesNotExistYetIsMadeFromTheBackup() throws {
        let store = path("new/sessions.sqlite")
        let summary = try SQLiteRestore.restore(from: backup, to: store)
        #expect(summary == SQLiteRestore.Summary(sessions: 1, keptAside: nil))
        // Its owner's only, the directory as the file: the ids in them are credentials.
        let modes = try [path("new"), store].map { try FileManager.default.attributesOfItem(atPath: $0)[.posixPermissions] as? Int }
        #expect(modes == [0o700, 0o600])
        let restored = try SQLiteSessionStore(path: store, historyCapacity: 8)
        defer { restored.close() }
        #expect(try restored.load(id: "b")?.state == Array(#"{"value":7}"#.utf8))
    }

    @Test func theReplacedStoreIsKeptBesideItUnderTheTimeOfTheRestore() throws {
        let store = path("sessions.sqlite")
        try writeStore(at: store, counters: [("a", 1)])
        let summary = try SQLiteRestore.restore(from: backup, to: store, now: Date(timeIntervalSince1970: 1_764_000_000))
        #expect(summary.keptAside == store + ".before-restore-20251124T160000Z")
        let kept = try SQLiteSessionStore(path: try #require(summary.keptAside), historyCapacity: 8)
        defer { kept.close() }
        #expect(try kept.load(id: "a") != nil)
        #expect(try kept.load(id: "b") == nil)
    }

    @Test func aRefusedRestoreChangesNothing() throws {
        let store = path("sessions.sqlite")
        let old = try SQLiteSessionStore(path: store, historyCapacity: 8)
        _ = try old.commit([.create(id: "a", type: "counter", state: Array(#"{"value":1}"#.utf8), lastActivity: 0)])
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        // In use (the store above is open), the store itself, not a store at all.
        let notAStore = path("notes.txt")
        #expect(FileManager.default.createFile(atPath: notAStore, contents: Data("notes\n".utf8)))
        let linked = path("link.sqlite")
        try FileManager.default.createSymbolicLink(atPath: linked, withDestinationPath: store)
        for (source, reason) in [
            (backup, "in use by another process"), (store, "is the store itself"), (linked, "is the store itself"),
            (notAStore, "not a database"),
        ] {
            #expect {
                _ = try SQLiteRestore.restore(from: source, to: store)
            } throws: { error in
                (error as? SessionStoreError)?.message.contains(reason) == true
            }
        }
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == (files + ["link.sqlite", "notes.txt"]).sorted())
        #expect(try old.load(id: "a") != nil)
        old.close()
    }

    @Test func sessionsTheBackupTakesBackResumePastTheVersionsTheReplacedStoreMayHaveShown() throws {
        let store = path("sessions.sqlite")
        do {
            // The backup holds "b" at version 0; the store has gone on with it, and with "c".
            let current = try SQLiteSessionStore(path: store, historyCapacity: 8)
            _ = try current.commit([
                .create(id: "b", type: "counter", state: Array(#"{"value":7}"#.utf8), lastActivity: 0),
                .create(id: "c", type: "counter", state: Array(#"{"value":0}"#.utf8), lastActivity: 0, publishingAhead: true),
                .version(id: "b", version: 5, state: Array(#"{"value":8}"#.utf8), startedThrough: 1, producedBy: 1, lastActivity: 1),
            ])
            current.close()
        }
        let older = path("older.sqlite")
        do {
            let backup = try SQLiteSessionStore(path: older, historyCapacity: 8)
            _ = try backup.commit([
                .create(id: "b", type: "counter", state: Array(#"{"value":7}"#.utf8), lastActivity: 0),
                .create(id: "c", type: "counter", state: Array(#"{"value":0}"#.utf8), lastActivity: 0),
                .create(id: "d", type: "counter", state: Array(#"{"value":0}"#.utf8), lastActivity: 0),
            ])
            backup.close()
        }
        let summary = try SQLiteRestore.restore(from: older, to: store)
        #expect(summary.sessions == 3)
        #expect(summary.wentBack == 2)
        let restored = try SQLiteSessionStore(path: store, historyCapacity: 8)
        defer { restored.close() }
        let b = try #require(try restored.load(id: "b"))
        #expect((b.version, b.shownThrough, b.state) == (0, 5, Array(#"{"value":7}"#.utf8)))
        // "c" was served ahead of its store: whatever its process may have shown is past too.
        #expect(try restored.load(id: "c")?.shownThrough == GroupCommitter.versionsShownAheadLimit)
        // Not in the replaced store: nothing was shown of it there.
        #expect(try restored.load(id: "d")?.shownThrough == 0)
    }

    /// A backup of the store as it is sends nothing back, though its versions (as the store's)
    /// are still in journal rows not folded into the sessions' rows.
    @Test func aBackupOfTheStoreAsItIsSendsNoSessionBack() throws {
        let store = path("sessions.sqlite")
        do {
            let current = try SQLiteSessionStore(path: store, historyCapacity: 8)
            _ = try current.commit([.create(id: "b", type: "counter", state: Array(#"{"value":7}"#.utf8), lastActivity: 0)])
            _ = try current.commit([
                .version(id: "b", version: 4, state: Array(#"{"value":8}"#.utf8), startedThrough: 1, producedBy: 1, lastActivity: 1)
            ])
            current.close()
        }
        let taken = path("taken.sqlite")
        _ = try SQLiteBackup.copy(from: store, to: taken)
        let summary = try SQLiteRestore.restore(from: taken, to: store)
        #expect(summary.wentBack == 0)
        let restored = try SQLiteSessionStore(path: store, historyCapacity: 8)
        defer { restored.close() }
        let b = try #require(try restored.load(id: "b"))
        #expect((b.version, b.shownThrough, b.state) == (4, 0, Array(#"{"value":8}"#.utf8)))
    }

    @Test func aBackupAnOlderBuildTookGainsTheColumnsAndIsMarked() throws {
        let store = path("sessions.sqlite")
        let backup = path("older-build.sqlite")
        for (file, version) in [(store, UInt64(3)), (backup, UInt64(1))] {
            let written = try SQLiteSessionStore(path: file, historyCapacity: 8)
            _ = try written.commit([
                .create(id: "b", type: "counter", state: Array(#"{"value":0}"#.utf8), lastActivity: 0),
                .version(id: "b", version: version, state: Array(#"{"value":1}"#.utf8), startedThrough: 1, producedBy: 1, lastActivity: 1),
            ])
            written.close()
        }
        // As a build before the columns wrote it.
        do {
            let connection = try SQLiteConnection(path: backup, create: false)
            try connection.execute(
                """
                ALTER TABLE sessions DROP COLUMN published_ahead; ALTER TABLE sessions DROP COLUMN shown_through;
                ALTER TABLE sessions DROP COLUMN creation; DROP INDEX sessions_by_subject; ALTER TABLE sessions DROP COLUMN subject
                """)
        }
        let summary = try SQLiteRestore.restore(from: backup, to: store)
        #expect(summary.wentBack == 1)
        let restored = try SQLiteSessionStore(path: store, historyCapacity: 8)
        defer { restored.close() }
        let b = try #require(try restored.load(id: "b"))
        #expect((b.version, b.shownThrough) == (1, 3))
        #expect(b.creation == nil)
        #expect(try restored.count(owner: "alice") == 0)
        // The new column takes what a session is created with.
        let creation = Array(#"{"context":{},"parameters":{"userID":"ada"}}"#.utf8)
        _ = try restored.commit([.create(id: "c", type: "profile", state: Array("{}".utf8), lastActivity: 0, creation: creation)])
        #expect(try restored.load(id: "c")?.creation == creation)
    }

    @Test func aReplacedStoreThatCannotBeReadLeavesTheBackupsVersionsAsTheyWere() throws {
        let store = path("sessions.sqlite")
        try writeStore(at: store, counters: [("b", 1)])
        // Damaged beyond reading: its header is gone.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: store))
        try handle.write(contentsOf: Data(repeating: 0, count: 100))
        try handle.close()
        let summary = try SQLiteRestore.restore(from: backup, to: store)
        #expect(summary.sessions == 1)
        #expect(summary.wentBack == nil)
        #expect(summary.keptAside != nil)
        let restored = try SQLiteSessionStore(path: store, historyCapacity: 8)
        defer { restored.close() }
        #expect(try restored.load(id: "b")?.shownThrough == 0)
    }
}
