import Foundation
import ReactorHosting
import Testing
@testable import ReactorStoreSQLite

/// Restores: the backup takes the store's place, the replaced store is kept beside it, and a
/// refused restore changes nothing.
@Suite struct SQLiteRestoreTests {
    private let directory: URL
    private let backup: String

    init() throws {
        directory = try makeTemporaryDirectory("sqlite-restore")
        backup = directory.appendingPathComponent("backup.sqlite").path
        try writeStore(at: backup, counters: [("b", 7)])
    }

    private func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

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
        FileManager.default.createFile(atPath: notAStore, contents: Data("notes\n".utf8))
        for (source, reason) in [(backup, "in use by another process"), (store, "is the store itself"), (notAStore, "not a database")] {
            #expect {
                _ = try SQLiteRestore.restore(from: source, to: store)
            } throws: { error in
                (error as? SessionStoreError)?.message.contains(reason) == true
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == (files + ["notes.txt"]).sorted())
        #expect(try old.load(id: "a") != nil)
        old.close()
    }
}
