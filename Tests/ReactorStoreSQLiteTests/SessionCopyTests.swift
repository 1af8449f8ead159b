import Foundation
import ReactorHosting
import StoreTestSupport
import Synchronization
import TestSupport
import Testing

@testable import ReactorStoreSQLite

/// A source that fails once it has given `failingAfter` sessions, as a store that breaks
/// mid-copy would.
private final class FailingSource: SessionExporting {
    let store: SQLiteSessionStore
    let failingAfter: Int
    private let exported = Atomic<Int>(0)

    init(_ store: SQLiteSessionStore, failingAfter: Int) {
        self.store = store
        self.failingAfter = failingAfter
    }

    func storedIDs(after id: String?, limit: Int) throws(SessionStoreError) -> [String] { try store.storedIDs(after: id, limit: limit) }
    func export(ids: [String]) throws(SessionStoreError) -> [CopiedSession] {
        if exported.add(ids.count, ordering: .relaxed).newValue > failingAfter { throw SessionStoreError(.unavailable, "the source broke") }
        return try store.export(ids: ids)
    }
    func commit(_ writes: [SessionWrite]) throws(SessionStoreError) -> Set<String> { try store.commit(writes) }
    func load(id: String) throws(SessionStoreError) -> StoredSession? { try store.load(id: id) }
    func contains(id: String) throws(SessionStoreError) -> Bool { try store.contains(id: id) }
    func count() throws(SessionStoreError) -> Int { try store.count() }
    func deleteIdle(before cutoff: Int64, excluding: Set<String>) throws(SessionStoreError) -> [String] { [] }
    func close() { store.close() }
}

/// `reactor-server copy` between SQLite stores: every session whole, all or nothing, never over
/// an existing file.
@Suite struct SessionCopyTests {
    @Test func everySessionIsCopiedWholeAcrossSeveralPages() throws {
        let scratch = try ScratchDirectory("copy")
        defer { withExtendedLifetime(scratch) {} }
        let source = try SQLiteSessionStore(path: scratch.path("source.sqlite"), historyCapacity: 8)
        defer { source.close() }
        // More than two pages of ids.
        let ids = try SampleSessions.write(SessionCopy.pageSize * 2 + 7, into: source)
        // A session a restored backup put back keeps the versions its clients may have seen.
        let restored = ids[4]
        try SQLiteConnection(path: source.path, create: false).execute("UPDATE sessions SET shown_through = 90 WHERE id = '\(restored)'")

        let destination = scratch.path("copied/sessions.sqlite")
        let summary = try SessionCopy.copy(from: source, into: try SQLiteSessionImport(path: destination))

        #expect(summary.sessions == ids.count)
        let copy = try SQLiteSessionStore(path: destination, historyCapacity: 8)
        defer { copy.close() }
        #expect(try copy.count() == ids.count)
        for (subject, owned) in SampleSessions.owned(of: ids.count) {
            #expect(try copy.count(owner: subject) == owned && owned > 0, "\(subject)")
        }
        var versions = 0
        var pending = 0
        for id in ids {
            let original = try #require(try source.export(ids: [id]).first?.session)
            #expect(try copy.load(id: id) == original)
            versions += original.history.count
            pending += original.pendingActions.count
        }
        #expect(summary.versions == versions && summary.pendingActions == pending)
        // What the comparison covers is there to compare.
        #expect(try copy.load(id: restored)?.shownThrough == 90)
        #expect(try copy.load(id: ids[0])?.publishedAhead == true)
        #expect(try copy.load(id: ids[5])?.pendingActions.map(\.seq) == [5])
        #expect(try copy.load(id: ids[2])?.pendingActions.map(\.attempts) == [1])
        #expect(try copy.load(id: ids[5])?.rememberedKeys.count == 5)
        // Nothing is left beside the copy.
        let left = try FileManager.default.contentsOfDirectory(atPath: scratch.path("copied"))
        #expect(left.allSatisfy { !$0.contains("partial") })
    }

    @Test func aFileAtTheDestinationIsNeverWrittenOver() throws {
        let scratch = try ScratchDirectory("copy")
        defer { withExtendedLifetime(scratch) {} }
        let source = try SQLiteSessionStore(path: scratch.path("source.sqlite"), historyCapacity: 8)
        defer { source.close() }
        _ = try SampleSessions.write(3, into: source)
        let destination = scratch.path("taken.sqlite")
        try Data("someone's file".utf8).write(to: URL(fileURLWithPath: destination))

        #expect {
            _ = try SessionCopy.copy(from: source, into: try SQLiteSessionImport(path: destination))
        } throws: { error in
            "\(error)".contains("already exists")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: destination)) == Data("someone's file".utf8))
    }

    @Test func aCopyCutOffLeavesNothingAtTheDestination() throws {
        let scratch = try ScratchDirectory("copy")
        defer { withExtendedLifetime(scratch) {} }
        let store = try SQLiteSessionStore(path: scratch.path("source.sqlite"), historyCapacity: 8)
        _ = try SampleSessions.write(SessionCopy.pageSize * 2 + 3, into: store)
        let source = FailingSource(store, failingAfter: SessionCopy.pageSize * 2)
        defer { source.close() }
        let destination = scratch.path("copy.sqlite")

        #expect {
            _ = try SessionCopy.copy(from: source, into: try SQLiteSessionImport(path: destination))
        } throws: { error in
            "\(error)".contains("the source broke")
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path).filter { $0.hasPrefix("copy") }
        #expect(left.isEmpty)
    }

    @Test func aStoreAServerHasOpenCannotBeCopiedFrom() throws {
        let scratch = try ScratchDirectory("copy")
        defer { withExtendedLifetime(scratch) {} }
        let path = scratch.path("source.sqlite")
        let serving = try SQLiteSessionStore(path: path, historyCapacity: 8)
        defer { serving.close() }
        // The copy opens its source as a server does: the lock refuses it.
        #expect {
            _ = try SQLiteSessionStore(path: path, historyCapacity: 8)
        } throws: { error in
            "\(error)".contains("in use by another process")
        }
    }
}
