import Foundation
import ReactorHosting
import TestSupport
import Testing

@testable import ReactorStoreSQLite

/// Backups of a store in use: written aside, checked and synced, then linked into place, so the
/// destination's name only ever holds a whole copy, and never replaces a file.
@Suite struct SQLiteBackupTests {
    /// Removed once the test ends.
    private let scratch: ScratchDirectory
    private var directory: URL { scratch.url }
    private let source: String
    private let destination: String

    init() throws {
        scratch = try ScratchDirectory("sqlite-backup")
        source = scratch.path("sessions.sqlite")
        destination = scratch.path("backup.sqlite")
        try writeStore(at: source, counters: (1...3).map { ("s\($0)", $0) })
    }

    private var files: [String] { (try? FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()) ?? [] }

    @Test func theCopyTakesItsNameOnlyOnceItIsWholeAndLeavesNothingElse() throws {
        var seenBeforePublishing: [String] = []
        let summary = try SQLiteBackup.copy(from: source, to: destination) {
            seenBeforePublishing = files
        }
        #expect(summary.sessions == 3)
        // Before: the checked copy aside, nothing under the destination's name.
        #expect(seenBeforePublishing.contains("backup.sqlite.partial-\(getpid())"))
        #expect(!seenBeforePublishing.contains("backup.sqlite"))
        // After: the copy under its name, no partial file left.
        #expect(!files.contains { $0.contains(".partial-") })
        let copy = try SQLiteSessionStore(path: destination, historyCapacity: 8)
        defer { copy.close() }
        #expect(try copy.load(id: "s2")?.state == Array(#"{"value":2}"#.utf8))
    }

    @Test func aBackupMakesItsDirectoryAndADirectoryIsNoStoreToBackUp() throws {
        let nested = scratch.path("backups/2026/sessions.sqlite")
        #expect(try SQLiteBackup.copy(from: source, to: nested).sessions == 3)
        #expect {
            _ = try SQLiteBackup.copy(from: scratch.path("backups"), to: scratch.path("other.sqlite"))
        } throws: { error in
            (error as? SessionStoreError)?.message.contains("\(scratch.path("backups")) is a directory") == true
        }
        #expect {
            _ = try SQLiteSessionStore(path: scratch.path("backups"), historyCapacity: 8)
        } throws: { error in
            (error as? SessionStoreError)?.message.contains("is a directory; a session store is a file") == true
        }
    }

    @Test func aBackupCutOffBeforeItsNameLeavesNoFileUnderIt() throws {
        #expect(throws: SessionStoreError.self) {
            _ = try SQLiteBackup.copy(from: source, to: destination) { () throws(SessionStoreError) in
                throw SessionStoreError(.unavailable, "interrupted")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: destination))
        #expect(!files.contains { $0.contains(".partial-") })
    }

    @Test func aFileMadeUnderTheNameWhileTheCopyRanIsLeftAlone() throws {
        #expect {
            _ = try SQLiteBackup.copy(from: source, to: destination) {
                _ = FileManager.default.createFile(atPath: destination, contents: Data("someone else's\n".utf8))
            }
        } throws: { error in
            (error as? SessionStoreError)?.message.contains("already exists") == true
        }
        #expect(FileManager.default.contents(atPath: destination) == Data("someone else's\n".utf8))
        #expect(!files.contains { $0.contains(".partial-") })
    }
}
