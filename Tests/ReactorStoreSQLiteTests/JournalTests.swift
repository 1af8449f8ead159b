import Foundation
import ReactorHosting
import Testing
@testable import ReactorStoreSQLite

/// The journal a commit appends to, and its folding into the tables: a session reads the same
/// before and after its writes are folded, and a journal left by a crash is folded on opening.
@Suite struct JournalTests {
    private let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-journal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    private var path: String { directory.appendingPathComponent("sessions.sqlite").path }

    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func everyKindOfWriteSurvivesItsRecord() throws {
        let writes: [SessionWrite] = [
            .create(id: "a", type: "counter", state: bytes("{}"), lastActivity: -3),
            .accept(id: "a", seq: 7, action: bytes("\"increase\"")),
            .version(id: "a", version: .max, state: [], startedThrough: 7, producedBy: 7, lastActivity: 1_795_000_000_000),
            .settle(id: "a", seq: 7),
            .touch(id: "é", lastActivity: 5),
            .release(id: "a"),
            .delete(id: "a"),
        ]
        let decoded = try #require(JournalRecord(decoding: JournalRecord(writes).encoded()))
        #expect(decoded.writes.map { "\($0)" } == writes.map { "\($0)" })
        // Cut anywhere, a record does not decode rather than decode wrong.
        let encoded = JournalRecord(writes).encoded()
        for length in [1, 9, encoded.count / 2, encoded.count - 1] {
            #expect(JournalRecord(decoding: Array(encoded.prefix(length))) == nil, "cut at \(length)")
        }
    }

    @Test func aSessionReadsTheSameThroughTheJournalAndAfterTheFold() throws {
        let store = try SQLiteSessionStore(path: path, historyCapacity: 3)
        var writes: [SessionWrite] = [.create(id: "a", type: "t", state: bytes("0"), lastActivity: 0)]
        for version in UInt64(1)...6 {
            writes.append(.accept(id: "a", seq: version, action: bytes("\(version)")))
            writes.append(.version(id: "a", version: version, state: bytes("\(version)"), startedThrough: version,
                                   producedBy: version, lastActivity: Int64(version)))
            if version < 6 { writes.append(.settle(id: "a", seq: version)) }
        }
        // One commit per write, as busy sessions commit.
        for write in writes { _ = try store.commit([write]) }
        _ = try store.commit([.create(id: "gone", type: "t", state: bytes("0"), lastActivity: 0), .delete(id: "gone")])
        let throughJournal = try #require(try store.load(id: "a"))
        #expect(try !store.contains(id: "gone"))
        while try store.fold() {}
        let folded = try #require(try store.load(id: "a"))
        #expect(folded == throughJournal)
        #expect(folded.version == 6)
        #expect(folded.history.map(\.version) == [4, 5, 6])
        #expect(folded.pendingActions.map(\.seq) == [6])
        #expect(folded.lastActivity == 6)
        #expect(try !store.contains(id: "gone"))
        #expect(try store.count() == 1)
    }

    @Test func aVersionNotNewerThanTheJournaledOneIsRefused() throws {
        let store = try SQLiteSessionStore(path: path, historyCapacity: 4)
        _ = try store.commit([.create(id: "a", type: "t", state: bytes("0"), lastActivity: 0)])
        _ = try store.commit([.version(id: "a", version: 2, state: bytes("2"), startedThrough: 0, producedBy: 0, lastActivity: 0)])
        let stale = try store.commit([
            .version(id: "a", version: 2, state: bytes("again"), startedThrough: 0, producedBy: 0, lastActivity: 0),
            .accept(id: "a", seq: 9, action: bytes("9")),
        ])
        #expect(stale == ["a"])
        let loaded = try #require(try store.load(id: "a"))
        #expect(loaded.state == bytes("2"))
        // Nothing of the refused session's batch was kept.
        #expect(loaded.pendingActions.isEmpty)
    }
}
