import Foundation
import ReactorHosting
import TestSupport
import Testing

@testable import ReactorStoreSQLite

/// Compacting a store: the free pages go back to the file system, every session stays as it was,
/// and a store in use is refused.
@Suite struct SQLiteCompactionTests {
    /// Removed once the test ends.
    private let scratch: ScratchDirectory
    private var store: String { scratch.path("sessions.sqlite") }

    init() throws {
        scratch = try ScratchDirectory("sqlite-compact")
    }

    @Test func theFreePagesOfDeletedSessionsGoBackAndTheRestIsKept() throws {
        let padding = String(repeating: "x", count: 2_000)
        do {
            let open = try SQLiteSessionStore(path: store, historyCapacity: 4)
            _ = try open.commit(
                (0..<400).map { index in
                    .create(
                        id: "s\(index)", type: "counter", state: Array(#"{"note":"\#(padding)","value":\#(index)}"#.utf8), lastActivity: 0)
                })
            _ = try open.commit((0..<390).map { .delete(id: "s\($0)") })
            open.close()
        }
        let summary = try SQLiteCompaction.compact(store)
        #expect(summary.sessions == 10)
        #expect(summary.bytesAfter * 4 < summary.bytesBefore, "\(summary)")
        #expect(try SQLiteSessionStore.diskUsage(of: store) == summary.bytesAfter)
        let reopened = try SQLiteSessionStore(path: store, historyCapacity: 4)
        defer { reopened.close() }
        #expect(try reopened.count() == 10)
        #expect(try reopened.load(id: "s399")?.state == Array(#"{"note":"\#(padding)","value":399}"#.utf8))
        #expect(try reopened.load(id: "s0") == nil)
    }

    @Test func aStoreInUseOrMissingIsRefusedAndLeftAsItWas() throws {
        #expect {
            _ = try SQLiteCompaction.compact(store)
        } throws: { error in
            (error as? SessionStoreError)?.message.contains("there is no session store") == true
        }
        let open = try SQLiteSessionStore(path: store, historyCapacity: 4)
        defer { open.close() }
        _ = try open.commit([.create(id: "a", type: "counter", state: Array(#"{"value":1}"#.utf8), lastActivity: 0)])
        #expect {
            _ = try SQLiteCompaction.compact(store)
        } throws: { error in
            (error as? SessionStoreError)?.message.contains("in use by another process") == true
        }
        #expect(try open.load(id: "a") != nil)
    }
}
