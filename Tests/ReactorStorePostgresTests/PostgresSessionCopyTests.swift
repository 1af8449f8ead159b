import Foundation
import Logging
import PostgresNIO
import ReactorHosting
import ReactorStoreSQLite
import StoreTestSupport
import Testing

@testable import ReactorStorePostgres

/// `reactor-server copy` to and from PostgreSQL, against a real server (`make test` starts one and
/// passes its URL in `REACTOR_TEST_POSTGRES`). Each test copies into databases of its own.
@Suite(
    .enabled(
        if: ProcessInfo.processInfo.environment["REACTOR_TEST_POSTGRES"] != nil,
        "needs REACTOR_TEST_POSTGRES (make test starts a server)"))
struct PostgresSessionCopyTests {
    private let server = PostgresLocation(url: ProcessInfo.processInfo.environment["REACTOR_TEST_POSTGRES"] ?? "")!
    private let logger = Logger(label: "test")

    /// A new, empty database on the test server.
    private func freshDatabase() async throws -> PostgresLocation {
        var location = server
        location.database = "copy_\(UInt32.random(in: 0...UInt32.max))"
        try await run("CREATE DATABASE \(location.database)", on: server)
        return location
    }

    /// Runs `sql` on a connection of the test's own to `location`; returns the first column of
    /// the first row, when it is a number.
    @discardableResult
    private func run(_ sql: String, on location: PostgresLocation) async throws -> Int64? {
        let connection = try await PostgresConnection.connect(configuration: location.connectionConfiguration, id: 1, logger: logger)
        do {
            var first: Int64?
            for try await row in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger) where first == nil {
                first = try? row.decode(Int64.self)
            }
            try await connection.close()
            return first
        } catch {
            try? await connection.close()
            throw error
        }
    }

    private func temporaryFile(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("copy-\(UUID().uuidString)/\(name)").path
    }

    @Test func sessionsGoFromSQLiteToPostgresAndBackWhole() async throws {
        let sqlitePath = temporaryFile("source.sqlite")
        defer { try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: sqlitePath).deletingLastPathComponent().path) }
        let sqlite = try SQLiteSessionStore(path: sqlitePath, historyCapacity: 8)
        defer { sqlite.close() }
        let ids = try SampleSessions.write(SessionCopy.pageSize + 9, into: sqlite)
        let database = try await freshDatabase()

        let there = try SessionCopy.copy(from: sqlite, into: try PostgresSessionImport(location: database))

        #expect(there.sessions == ids.count)
        let node = try PostgresSessionStore(location: database, node: "a", lease: .seconds(30), historyCapacity: 8)
        defer { node.close() }
        #expect(try node.servedSessions() == 0)
        #expect(try node.export(ids: ids) == (try sqlite.export(ids: ids)))
        // What the comparison covers is there to compare.
        #expect(try node.export(ids: [ids[2]]).first?.session.pendingActions.map(\.attempts) == [1])
        for (subject, owned) in SampleSessions.owned(of: ids.count) {
            #expect(try node.count(owner: subject) == owned && owned > 0, "\(subject)")
        }
        #expect(try node.export(ids: [ids[1], "no-such-session", ids[0]]).map(\.id) == [ids[1], ids[0]])
        // Unclaimed: the first node to serve one claims it.
        #expect(try node.load(id: ids[5])?.pendingActions.map(\.seq) == [5])
        #expect(try node.servedSessions() == 1)
        _ = try node.commit([.release(id: ids[5])])

        let back = temporaryFile("back.sqlite")
        defer { try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: back).deletingLastPathComponent().path) }
        let summary = try SessionCopy.copy(from: node, into: try SQLiteSessionImport(path: back))
        #expect(summary == there)
        let copy = try SQLiteSessionStore(path: back, historyCapacity: 8)
        defer { copy.close() }
        // Marks go both ways: session 0 was marked, and the release cleared session 5's.
        for id in ids where id != ids[5] { #expect(try copy.load(id: id) == (try sqlite.export(ids: [id]).first?.session)) }
        #expect(try copy.load(id: ids[0])?.publishedAhead == true)
        #expect(try copy.load(id: ids[5])?.publishedAhead == false)
    }

    @Test func theVersionsARestoreCarriedGoWithTheSession() async throws {
        let sqlitePath = temporaryFile("source.sqlite")
        defer { try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: sqlitePath).deletingLastPathComponent().path) }
        let backup = sqlitePath + ".backup"
        let id: String
        do {
            let sqlite = try SQLiteSessionStore(path: sqlitePath, historyCapacity: 8)
            id = try SampleSessions.write(1, into: sqlite)[0]
            _ = try SQLiteBackup.copy(from: sqlitePath, to: backup)
            _ = try sqlite.commit([.version(id: id, version: 9, state: Array("9".utf8), startedThrough: 0, producedBy: 0, lastActivity: 5)])
            sqlite.close()
        }
        // Back to version 0; clients may have seen 9 (and, marked, up to 65,536 past it).
        _ = try SQLiteRestore.restore(from: backup, to: sqlitePath)
        let sqlite = try SQLiteSessionStore(path: sqlitePath, historyCapacity: 8)
        defer { sqlite.close() }
        let restored = try #require(try sqlite.export(ids: [id]).first?.session)
        #expect(restored.version == 0 && restored.shownThrough == 9 + 65_536)
        let database = try await freshDatabase()

        _ = try SessionCopy.copy(from: sqlite, into: try PostgresSessionImport(location: database))

        let node = try PostgresSessionStore(location: database, node: "a", lease: .seconds(30), historyCapacity: 8)
        defer { node.close() }
        #expect(try node.load(id: id) == restored)
    }

    @Test func aDatabaseHoldingSessionsIsNeverCopiedInto() async throws {
        let database = try await freshDatabase()
        do {
            let node = try PostgresSessionStore(location: database, node: "a", lease: .seconds(30), historyCapacity: 8)
            _ = try SampleSessions.write(1, into: node)
            node.close()
        }
        #expect {
            _ = try PostgresSessionImport(location: database)
        } throws: { error in
            (error as? SessionStoreError)?.message.contains("holds 1 session already") == true
        }
        #expect(try await run("SELECT count(*) FROM reactor_sessions", on: database) == 1)
    }

    @Test func sessionsANodeServesAreNotCopiedUntilItLetsThemGo() async throws {
        let database = try await freshDatabase()
        let node = try PostgresSessionStore(location: database, node: "a", lease: .seconds(30), historyCapacity: 8)
        defer { node.close() }
        let ids = try SampleSessions.write(4, into: node)
        _ = try node.load(id: ids[2])
        let destination = try await freshDatabase()

        #expect {
            _ = try SessionCopy.copy(from: node, into: try PostgresSessionImport(location: destination))
        } throws: { error in
            (error as? SessionStoreError)?.message.contains("1 session is served by running processes") == true
        }
        #expect(try await run("SELECT count(*) FROM reactor_sessions", on: destination) == 0)

        _ = try node.commit([.release(id: ids[2])])
        #expect(try SessionCopy.copy(from: node, into: try PostgresSessionImport(location: destination)).sessions == 4)
    }

    @Test func aCopyWhoseConnectionIsCutLeavesTheDatabaseEmpty() async throws {
        let sqlitePath = temporaryFile("source.sqlite")
        defer { try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: sqlitePath).deletingLastPathComponent().path) }
        let sqlite = try SQLiteSessionStore(path: sqlitePath, historyCapacity: 8)
        defer { sqlite.close() }
        let ids = try SampleSessions.write(20, into: sqlite)
        let database = try await freshDatabase()
        let destination = try PostgresSessionImport(location: database)
        try destination.add(try sqlite.export(ids: Array(ids.prefix(10))))

        // As a restarted database or a dropped network would.
        try await run(
            """
            SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
            WHERE datname = '\(database.database)' AND pid <> pg_backend_pid()
            """, on: server)
        var failure: SessionStoreError?
        do {
            try destination.add(try sqlite.export(ids: Array(ids.dropFirst(10))))
            try destination.commit()
        } catch {
            failure = error
            destination.abandon()
        }
        #expect(failure != nil)
        #expect(try await run("SELECT count(*) FROM reactor_sessions", on: database) == 0)
    }

    @Test func aSnapshotReadsEverySessionAsOfItsStartWhileANodeWritesOn() async throws {
        let database = try await freshDatabase()
        let node = try PostgresSessionStore(location: database, node: "a", lease: .seconds(30), historyCapacity: 8)
        defer { node.close() }
        let ids = try SampleSessions.write(3, into: node)
        let before = try node.export(ids: ids)

        let snapshot = try PostgresSnapshot(location: database, historyCapacity: 8)
        defer { snapshot.close() }
        _ = try node.load(id: ids[2])
        _ = try node.commit([.version(id: ids[2], version: 3, state: Array("3".utf8), startedThrough: 2, producedBy: 0, lastActivity: 9)])
        #expect(try node.export(ids: [ids[2]]).first?.session.version == 3)

        // As they were when it began: the node's claim and its later version are not in it.
        #expect(try snapshot.servedSessions() == 0)
        #expect(try snapshot.export(ids: try snapshot.storedIDs(after: nil, limit: 10)) == before.sorted { $0.id < $1.id })
    }

    @Test func aRestoreReplacesEverySessionAndItsVersionsGoOnPastTheReplacedOnes() async throws {
        let database = try await freshDatabase()
        let node = try PostgresSessionStore(location: database, node: "a", lease: .seconds(30), historyCapacity: 8)
        defer { node.close() }
        // Session 0 is marked as served ahead of the store, 1 has one version, 2 has two.
        let ids = try SampleSessions.write(3, into: node)
        let backup = temporaryFile("backup.sqlite")
        defer { try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: backup).deletingLastPathComponent().path) }
        do {
            let snapshot = try PostgresSnapshot(location: database, historyCapacity: 8)
            defer { snapshot.close() }
            _ = try SessionCopy.copy(from: snapshot, into: try SQLiteSessionImport(path: backup), whileServed: true)
        }
        let backedUp = try node.export(ids: ids)
        // After the backup: session 1 goes on to version 10, and a new session is made.
        _ = try node.load(id: ids[1])
        _ = try node.commit([
            .version(id: ids[1], version: 10, state: Array("10".utf8), startedThrough: 1, producedBy: 0, lastActivity: 9),
            .release(id: ids[1]),
        ])
        let later = try SampleSessions.write(1, into: node)[0]

        let source = try SQLiteBackupSource(path: backup, historyCapacity: 8)
        defer { source.close() }
        let aside = backup + ".replaced"
        let restore = try PostgresSessionImport(
            location: database, replacing: true,
            keepingReplacedIn: { () throws(SessionStoreError) in
                try SQLiteSessionImport(path: aside)
            })
        #expect(try SessionCopy.copy(from: source, into: restore).sessions == 3)

        #expect(restore.wentBack == 2)
        // What it replaced is kept whole, as it was just before.
        #expect(restore.replacedSessions == 4)
        let kept = try SQLiteSessionStore(path: aside, historyCapacity: 8)
        #expect(try kept.load(id: ids[1])?.version == 10)
        #expect(try kept.load(id: later) != nil)
        kept.close()
        let restored = try node.export(ids: ids + [later])
        #expect(restored.map(\.id) == ids)
        var expected = backedUp
        expected[0].session.shownThrough = 0 + 65_536  // its version, past any it may have shown ahead
        expected[1].session.shownThrough = 10
        #expect(restored == expected)
        // The backup file is as it was: read through a copy, removed with it.
        source.close()
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: URL(fileURLWithPath: backup).deletingLastPathComponent().path)
                .filter { $0.contains("reading") }.isEmpty)
    }

    @Test func aRestoreIsRefusedWhileANodeServesASessionAndChangesNothing() async throws {
        let database = try await freshDatabase()
        let node = try PostgresSessionStore(location: database, node: "a", lease: .seconds(30), historyCapacity: 8)
        defer { node.close() }
        let ids = try SampleSessions.write(2, into: node)
        _ = try node.load(id: ids[0])

        #expect {
            _ = try PostgresSessionImport(location: database, replacing: true)
        } throws: { error in
            (error as? SessionStoreError)?.message.contains("1 session is served by running processes") == true
        }
        #expect(try await run("SELECT count(*) FROM reactor_sessions", on: database) == 2)
    }
}
