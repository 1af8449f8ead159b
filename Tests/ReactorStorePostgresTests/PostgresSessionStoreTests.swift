// Over 450 lines: one suite, whose tests share its fixtures; a split would repeat them.
import Foundation
import Locking
import Logging
import PostgresNIO
import ReactorHosting
import Synchronization
import Testing

@testable import ReactorStorePostgres

/// The test server's URL, from `make test`.
private let testDatabaseURL = ProcessInfo.processInfo.environment["REACTOR_TEST_POSTGRES"]

/// The PostgreSQL store against a real server: `make test` starts one of its own and passes its
/// URL in `REACTOR_TEST_POSTGRES` (`Tests/python/cluster.py with-postgres -- swift test`).
/// Several stores on one database stand for several nodes.
@Suite(.enabled(if: testDatabaseURL != nil, "needs REACTOR_TEST_POSTGRES (make test starts a server)"))
struct PostgresSessionStoreTests {
    private let location = PostgresLocation(url: testDatabaseURL ?? "")!

    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// A fresh session id for each test, so tests share the database without meeting.
    private func newID() -> String { InstanceID.make() }

    private func node(_ name: String, lease: Duration = .seconds(30), historyCapacity: Int = 8) throws -> PostgresSessionStore {
        try PostgresSessionStore(location: location, node: name, lease: lease, historyCapacity: historyCapacity)
    }

    /// Two new counters, both claimed by `store`.
    private func twoCountersClaimed(by store: PostgresSessionStore) throws -> (String, String) {
        let (first, second) = (newID(), newID())
        _ = try store.commit([
            .create(id: first, type: "counter", state: bytes("0"), lastActivity: 0),
            .create(id: second, type: "counter", state: bytes("0"), lastActivity: 0),
        ])
        _ = try store.load(id: first)
        _ = try store.load(id: second)
        return (first, second)
    }

    /// Polls `condition` (a store thread reports to it) until it holds or 10 s have passed.
    private func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// A connection of the test's own to `database` (the test database by default).
    private func connect(to database: String? = nil) async throws -> PostgresConnection {
        var target = location
        if let database { target.database = database }
        return try await PostgresConnection.connect(
            configuration: target.connectionConfiguration, id: 1,
            logger: Logger(label: "test"))
    }

    /// Runs `sql` on its own connection, as an operator (or a lapsed clock) would.
    private func execute(_ sql: String) async throws {
        let connection = try await connect()
        do {
            try await connection.query(PostgresQuery(unsafeSQL: sql), logger: Logger(label: "test"))
        } catch {
            try await connection.close()
            throw error
        }
        try await connection.close()
    }

    @Test func whatIsCommittedLoadsBackWithItsHistoryAndPendingActions() throws {
        let store = try node("a", historyCapacity: 3)
        defer { store.close() }
        let id = newID()
        var writes: [SessionWrite] = [.create(id: id, type: "counter", state: bytes("0"), lastActivity: 100)]
        #expect(try store.commit(writes).isEmpty)
        #expect(try store.load(id: id)?.history.map(\.version) == [0])
        writes = []
        for version in 1...10 as ClosedRange<UInt64> {
            writes.append(.accept(id: id, seq: version, action: bytes("\"a\(version)\"")))
            writes.append(
                .version(
                    id: id, version: version, state: bytes("\(version)"), startedThrough: version,
                    producedBy: version, lastActivity: 100 + Int64(version)))
            if version < 9 { writes.append(.settle(id: id, seq: version)) }
            // Several batches, so that history chunks are trimmed as versions pass the capacity.
            if version % 4 == 0 {
                #expect(try store.commit(writes).isEmpty)
                writes = []
            }
        }
        #expect(try store.commit(writes).isEmpty)
        let loaded = try #require(try store.load(id: id))
        #expect(loaded.type == "counter")
        #expect(loaded.version == 10)
        #expect(loaded.state == bytes("10"))
        #expect(loaded.startedThrough == 10)
        #expect(loaded.lastActivity == 110)
        #expect(loaded.history.map(\.version) == [8, 9, 10])
        #expect(loaded.history.map(\.state) == ["8", "9", "10"].map(bytes))
        #expect(
            loaded.pendingActions == [
                PendingAction(seq: 9, action: bytes("\"a9\""), producedVersions: 1),
                PendingAction(seq: 10, action: bytes("\"a10\""), producedVersions: 1),
            ])
        #expect(try store.contains(id: id))
        #expect(try store.load(id: newID()) == nil)
        _ = try store.commit([.delete(id: id)])
        #expect(try store.load(id: id) == nil)
        #expect(try !store.contains(id: id))
    }

    @Test func actionRecordsOfSeveralSessionsAreKeptAndDroppedBatchByBatch() throws {
        let store = try node("a")
        defer { store.close() }
        let ids = (0..<3).map { _ in newID() }
        #expect(try store.commit(ids.map { .create(id: $0, type: "counter", state: bytes("0"), lastActivity: 100) }).isEmpty)
        // Loaded, so that this node owns them and may write them.
        for id in ids { #expect(try store.load(id: id) != nil) }
        // Two actions of each session accepted in one batch, the second's record queued twice:
        // one record each, the last.
        var writes: [SessionWrite] = []
        for id in ids {
            for seq in 1...2 as ClosedRange<UInt64> { writes.append(.accept(id: id, seq: seq, action: bytes("\"a\(seq)\""))) }
            writes.append(.accept(id: id, seq: 2, action: bytes("\"b2\"")))
        }
        #expect(try store.commit(writes).isEmpty)
        // The next: each first action settles, two sessions accept a third, and the last is
        // deleted after accepting it: none of its records may outlive it.
        writes = ids.map { .settle(id: $0, seq: 1) }
        writes.append(.accept(id: ids[0], seq: 3, action: bytes("\"a3\"")))
        writes.append(.accept(id: ids[2], seq: 3, action: bytes("\"a3\"")))
        writes.append(.delete(id: ids[2]))
        #expect(try store.commit(writes).isEmpty)
        #expect(
            try store.load(id: ids[0])?.pendingActions == [
                PendingAction(seq: 2, action: bytes("\"b2\""), producedVersions: 0),
                PendingAction(seq: 3, action: bytes("\"a3\""), producedVersions: 0),
            ])
        #expect(try store.load(id: ids[1])?.pendingActions.map(\.seq) == [2])
        #expect(try store.load(id: ids[2]) == nil)
        #expect(try store.commit([.create(id: ids[2], type: "counter", state: bytes("0"), lastActivity: 200)]).isEmpty)
        #expect(try store.load(id: ids[2])?.pendingActions.isEmpty == true)
    }

    @Test func attemptsAreCountedOnActionRecordsAndFollowARenumberedOne() throws {
        let store = try node("a")
        defer { store.close() }
        let id = newID()
        #expect(
            try store.commit([
                .create(id: id, type: "counter", state: bytes("0"), lastActivity: 100),
                .accept(id: id, seq: 1, action: bytes(#""x""#)), .accept(id: id, seq: 2, action: bytes(#""y""#)),
            ]).isEmpty)
        #expect(try store.load(id: id) != nil)
        #expect(try store.commit([.attempt(id: id, seq: 1)]).isEmpty)
        // As an activation renumbers action 2 (its record and the attempt in one batch, gathered
        // into one statement before the attempt's); an attempt for a record not stored changes nothing.
        #expect(
            try store.commit([
                .attempt(id: id, seq: 1), .accept(id: id, seq: 3, action: bytes(#""y""#)), .attempt(id: id, seq: 3),
                .settle(id: id, seq: 2), .attempt(id: id, seq: 9),
            ]).isEmpty)
        #expect(
            try store.load(id: id)?.pendingActions == [
                PendingAction(seq: 1, action: bytes(#""x""#), attempts: 2), PendingAction(seq: 3, action: bytes(#""y""#), attempts: 1),
            ])
        // A process that stops cleanly takes back the attempts it counted: one each, never below
        // none, and nothing for a record that is not stored (settled meanwhile).
        try store.withdrawAttempts([id: [1, 3, 2, 9], newID(): [1]])
        try store.withdrawAttempts([id: [3]])
        #expect(
            try store.load(id: id)?.pendingActions == [
                PendingAction(seq: 1, action: bytes(#""x""#), attempts: 1), PendingAction(seq: 3, action: bytes(#""y""#), attempts: 0),
            ])
    }

    /// As an activation writes it when the action it sends again takes the sequence of one it
    /// reports (stored by an earlier build, no longer decodable) and settles in the same batch.
    @Test func aSequenceSettledAndThenAcceptedAgainInOneBatchHoldsTheNewRecord() throws {
        let store = try node("a")
        defer { store.close() }
        let id = newID()
        _ = try store.commit([
            .create(id: id, type: "counter", state: bytes("0"), lastActivity: 100),
            .accept(id: id, seq: 1, action: bytes(#""reset""#)), .accept(id: id, seq: 2, action: bytes(#""increase""#)),
        ])
        #expect(try store.load(id: id) != nil)
        #expect(
            try store.commit([
                .settle(id: id, seq: 1), .accept(id: id, seq: 1, action: bytes(#""increase""#)), .attempt(id: id, seq: 1),
                .settle(id: id, seq: 2),
            ]).isEmpty)
        #expect(try store.load(id: id)?.pendingActions == [PendingAction(seq: 1, action: bytes(#""increase""#), attempts: 1)])
    }

    @Test func aSessionWhoseRowIsAheadOfTheBatchIsReportedStaleAndTheOthersMove() async throws {
        let store = try node("a")
        defer { store.close() }
        let (ahead, behind) = (newID(), newID())
        #expect(try store.commit([ahead, behind].map { .create(id: $0, type: "counter", state: bytes("0"), lastActivity: 100) }).isEmpty)
        for id in [ahead, behind] { #expect(try store.load(id: id) != nil) }
        // Another writer moved one row past what this node is about to write.
        try await execute("UPDATE reactor_sessions SET version = 50, state = '\\x3530' WHERE id = '\(ahead)'")
        let writes: [SessionWrite] = [ahead, behind].flatMap { id in
            (1...2 as ClosedRange<UInt64>).map { version in
                SessionWrite.version(
                    id: id, version: version, state: bytes("\(version)"), startedThrough: 0, producedBy: 0, lastActivity: 200)
            }
        }
        #expect(try store.commit(writes) == [ahead])
        let kept = try #require(try store.load(id: ahead))
        #expect(kept.version == 50)
        #expect(kept.state == bytes("50"))
        let moved = try #require(try store.load(id: behind))
        #expect(moved.version == 2)
        #expect(moved.state == bytes("2"))
        #expect(moved.history.map(\.version) == [0, 1, 2])
    }

    @Test func aNewSessionIsUnclaimedAndTheFirstNodeToLoadItOwnsIt() throws {
        let (a, b) = (try node("a"), try node("b"))
        defer {
            a.close()
            b.close()
        }
        let id = newID()
        _ = try a.commit([.create(id: id, type: "counter", state: bytes("0"), lastActivity: 0)])
        // Created on a, first asked for on b: b claims it.
        #expect(try b.load(id: id)?.version == 0)
        #expect(throws: SessionStoreError.self) { try a.load(id: id) }
        do {
            _ = try a.load(id: id)
        } catch {
            #expect(error.kind == .ownedElsewhere)
        }
        // Its owner may load it again (after leaving memory), and goes on writing.
        #expect(try b.load(id: id) != nil)
        #expect(try b.commit([.version(id: id, version: 1, state: bytes("1"), startedThrough: 0, producedBy: 0, lastActivity: 1)]).isEmpty)
    }

    @Test func aNodeWhoseSessionWasClaimedElsewhereWritesNothingOfIt() async throws {
        // a renews its leases every 20 minutes, so not while the test lets one lapse (with the
        // default 30 s lease it renewed after 10 s, which a slowed test run reached).
        let (a, b) = (try node("a", lease: .seconds(3600)), try node("b"))
        defer {
            a.close()
            b.close()
        }
        let (id, other) = try twoCountersClaimed(by: a)
        // a's lease on `id` lapses (a paused process, a partition), and b claims it.
        try await execute("UPDATE reactor_sessions SET lease_until = now() - interval '1 second' WHERE id = '\(id)'")
        #expect(try b.load(id: id)?.version == 0)

        let stale = try a.commit([
            .accept(id: id, seq: 1, action: bytes(#""increase""#)),
            .version(id: id, version: 1, state: bytes("1"), startedThrough: 1, producedBy: 1, lastActivity: 5),
            .accept(id: other, seq: 1, action: bytes(#""increase""#)),
        ])
        #expect(stale == [id])
        // Nothing of a's writes to `id` landed; its write to the session it still owns did.
        let claimedByB = try #require(try b.load(id: id))
        #expect(claimedByB.version == 0)
        #expect(claimedByB.pendingActions.isEmpty)
        #expect(try a.load(id: other)?.pendingActions.map(\.seq) == [1])
        // And a cannot take it back while b's lease is live.
        #expect(throws: SessionStoreError.self) { try a.load(id: id) }
    }

    @Test func aSessionItsOwnerServedAheadOfTheStoreStaysMarkedForTheNodeThatTakesItOver() async throws {
        // a renews nothing while the test lets its lease lapse (as above).
        let (a, b) = (try node("a", lease: .seconds(3600)), try node("b"))
        defer {
            a.close()
            b.close()
        }
        let (id, other) = try twoCountersClaimed(by: a)
        #expect(try a.load(id: id)?.publishedAhead == false)
        _ = try a.commit([.publishingAhead(id: id), .publishingAhead(id: other)])
        // a hands `other` over cleanly; its lease on `id` lapses (a crashed).
        _ = try a.commit([.release(id: other)])
        try await execute("UPDATE reactor_sessions SET lease_until = now() - interval '1 second' WHERE id = '\(id)'")
        #expect(try b.load(id: id)?.publishedAhead == true)
        #expect(try b.load(id: other)?.publishedAhead == false)
        // Created marked (a node serving it from its creation).
        let created = newID()
        _ = try b.commit([.create(id: created, type: "counter", state: bytes("0"), lastActivity: 0, publishingAhead: true)])
        #expect(try b.load(id: created)?.publishedAhead == true)
    }

    @Test func renewalReportsTheSessionsAnotherNodeClaimed() async throws {
        let lost = Locked<Set<String>>([])
        let a = try node("a", lease: .milliseconds(600))
        defer { a.close() }
        a.onOwnershipLost { ids in lost.withLock { $0.formUnion(ids) } }
        let (id, _) = try twoCountersClaimed(by: a)
        // Another node claims it (as b would once a's lease had lapsed).
        try await execute(
            "UPDATE reactor_sessions SET owner = 'b', epoch = epoch + 1, lease_until = now() + interval '1 hour' WHERE id = '\(id)'")
        // a renews every 200 ms; a bounded wait for its report.
        try await waitUntil { !lost.withLock { $0.isEmpty } }
        #expect(lost.withLock { $0 } == [id])
    }

    @Test func askingForAHeldSessionAsksItsOwnerToHandItOver() async throws {
        let asked = Locked<[String]>([])
        let (a, b) = (try node("a"), try node("b"))
        defer {
            a.close()
            b.close()
        }
        a.onHandOverRequested { id in asked.withLock { $0.append(id) } }
        let id = newID()
        _ = try a.commit([.create(id: id, type: "counter", state: bytes("0"), lastActivity: 0)])
        _ = try a.load(id: id)
        #expect(throws: SessionStoreError.self) { try b.load(id: id) }
        try await waitUntil { !asked.withLock { $0.isEmpty } }
        #expect(asked.withLock { $0 } == [id])
        // Released, it is b's on its next load.
        _ = try a.commit([.release(id: id)])
        #expect(try b.load(id: id) != nil)
    }

    @Test func idleSessionsNoNodeHoldsExpireInBatches() throws {
        // Two per statement: the five idle sessions take three.
        let store = try PostgresSessionStore(
            location: location, node: "a", lease: .seconds(30), historyCapacity: 8,
            idleDeletionBatch: 2)
        defer { store.close() }
        let idle = (0..<5).map { _ in newID() }
        let (held, recent) = (newID(), newID())
        // Times far below the other tests' (which share the database and run alongside), so that
        // only these sessions are old enough to expire.
        _ = try store.commit(
            idle.map { .create(id: $0, type: "t", state: bytes("0"), lastActivity: -2_000_000) }
                + [
                    .create(id: held, type: "t", state: bytes("0"), lastActivity: -2_000_000),
                    .create(id: recent, type: "t", state: bytes("0"), lastActivity: -10),
                ])
        _ = try store.load(id: held)
        let deleted = try store.deleteIdle(before: -1_000_000, excluding: [])
        #expect(deleted.sorted() == idle.sorted())
        for id in idle { #expect(try !store.contains(id: id)) }
        #expect(try store.contains(id: held))
        #expect(try store.contains(id: recent))
    }

    @Test func aDatabaseOfAnotherApplicationIsRefusedAndLeftUntouched() async throws {
        let database = "other_\(UInt32.random(in: 0...UInt32.max))"
        try await execute("CREATE DATABASE \(database)")
        var elsewhere = location
        elsewhere.database = database
        let connection = try await connect(to: database)
        try await connection.query("CREATE TABLE reactor_meta(key text PRIMARY KEY, value text NOT NULL)", logger: Logger(label: "test"))
        try await connection.query("INSERT INTO reactor_meta VALUES ('application', 'something else')", logger: Logger(label: "test"))
        do {
            _ = try PostgresSessionStore(location: elsewhere, node: "a", lease: .seconds(10), historyCapacity: 4)
            Issue.record("another application's database was opened")
        } catch {
            #expect(error.kind == .corrupt)
            #expect(error.message.contains(database))
        }
        let rows = try await connection.query(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'reactor_%'", logger: Logger(label: "test"))
        for try await count in rows.decode(Int64.self) { #expect(count == 1) }
        try await connection.close()
    }

    @Test func idempotencyKeysAreKeptAfterTheirActionsAndGoWithTheSession() throws {
        let (a, b) = (try node("a"), try node("b"))
        defer {
            a.close()
            b.close()
        }
        let id = newID()
        _ = try a.commit([.create(id: id, type: "counter", state: bytes("0"), lastActivity: 0)])
        _ = try a.load(id: id)
        _ = try a.commit([
            .accept(id: id, seq: 1, action: bytes(#""increase""#), key: RememberedKey(key: "one", seq: 1, digest: UInt64.max)),
            .settle(id: id, seq: 1),
        ])
        _ = try a.commit([.release(id: id)])
        // Another node, taking the session over, knows the key.
        #expect(try b.load(id: id)?.rememberedKeys == [RememberedKey(key: "one", seq: 1, digest: UInt64.max)])
        _ = try b.commit([.delete(id: id)])
        _ = try b.commit([.create(id: id, type: "counter", state: bytes("0"), lastActivity: 0)])
        #expect(try b.load(id: id)?.rememberedKeys.isEmpty == true)
    }

    @Test func theCountIsEveryNodesSessions() async throws {
        // A database of this test's own, so other tests' sessions do not count.
        let database = "count_\(UInt32.random(in: 0...UInt32.max))"
        try await execute("CREATE DATABASE \(database)")
        var own = location
        own.database = database
        let (a, b) = (
            try PostgresSessionStore(location: own, node: "a", lease: .seconds(30), historyCapacity: 4),
            try PostgresSessionStore(location: own, node: "b", lease: .seconds(30), historyCapacity: 4)
        )
        defer {
            a.close()
            b.close()
        }
        #expect(try a.count() == 0)
        let empty = try #require(try a.diskUsage())
        _ = try a.commit([
            .create(id: newID(), type: "counter", state: bytes("0"), lastActivity: 0),
            .create(id: newID(), type: "counter", state: bytes("0"), lastActivity: 0),
        ])
        let third = newID()
        _ = try b.commit([.create(id: third, type: "counter", state: bytes("0"), lastActivity: 0)])
        #expect(try a.count() == 3)
        _ = try b.load(id: third)
        _ = try b.commit([.delete(id: third)])
        #expect(try b.count() == 2)
        // Measured in the database: tables and indexes grow by pages of 8 KiB as rows arrive,
        // and both nodes see the same figure.
        let large = String(repeating: "7", count: 30_000)
        _ = try a.commit((0..<20).map { _ in .create(id: newID(), type: "counter", state: bytes(large), lastActivity: 0) })
        let grown = try #require(try a.diskUsage())
        #expect(grown > empty)
        #expect(grown % 8192 == 0)
        #expect(try b.diskUsage() == grown)
    }

    @Test func aDatabaseWrittenByANewerSchemaIsRefused() async throws {
        let database = "newer_\(UInt32.random(in: 0...UInt32.max))"
        try await execute("CREATE DATABASE \(database)")
        var newer = location
        newer.database = database
        try PostgresSessionStore(location: newer, node: "a", lease: .seconds(10), historyCapacity: 4).close()
        let connection = try await connect(to: database)
        try await connection.query("UPDATE reactor_meta SET value = '99' WHERE key = 'schema'", logger: Logger(label: "test"))
        try await connection.close()
        do {
            _ = try PostgresSessionStore(location: newer, node: "a", lease: .seconds(10), historyCapacity: 4)
            Issue.record("a newer schema was opened")
        } catch {
            #expect(error.kind == .corrupt)
            #expect(error.message.contains("schema 99"))
        }
    }

    @Test func aDatabaseMadeBeforeTheMarkGainsItsColumnsAndKeepsItsSessions() async throws {
        let database = "earlier_\(UInt32.random(in: 0...UInt32.max))"
        try await execute("CREATE DATABASE \(database)")
        var earlier = location
        earlier.database = database
        let id = newID()
        do {
            let store = try PostgresSessionStore(location: earlier, node: "a", lease: .seconds(10), historyCapacity: 4)
            _ = try store.commit([.create(id: id, type: "counter", state: bytes("0"), lastActivity: 0)])
            store.close()
        }
        // As a build before the column left it.
        let connection = try await connect(to: database)
        try await connection.query(
            "ALTER TABLE reactor_sessions DROP COLUMN published_ahead, DROP COLUMN shown_through, DROP COLUMN creation, DROP COLUMN subject",
            logger: Logger(label: "test"))
        try await connection.query("ALTER TABLE reactor_actions DROP COLUMN attempts", logger: Logger(label: "test"))
        try await connection.close()
        let store = try PostgresSessionStore(location: earlier, node: "a", lease: .seconds(10), historyCapacity: 4)
        defer { store.close() }
        let loaded = try #require(try store.load(id: id))
        #expect(loaded.state == bytes("0"))
        #expect(!loaded.publishedAhead && loaded.shownThrough == 0)
        #expect(loaded.creation == nil)
        _ = try store.commit([.publishingAhead(id: id)])
        #expect(try store.load(id: id)?.publishedAhead == true)
        // The new column takes what a session is created with.
        let created = newID()
        let creation = bytes(#"{"context":{"subject":"ada"},"parameters":{"userID":"ada"}}"#)
        _ = try store.commit([.create(id: created, type: "profile", state: bytes("{}"), lastActivity: 0, creation: creation)])
        #expect(try store.load(id: created)?.creation == creation)
        #expect(try store.count(owner: "ada") == 1)
        // So does the actions' column.
        _ = try store.commit([.accept(id: id, seq: 1, action: bytes(#""x""#)), .attempt(id: id, seq: 1)])
        #expect(try store.load(id: id)?.pendingActions == [PendingAction(seq: 1, action: bytes(#""x""#), attempts: 1)])
    }

    @Test func anUnreachableDatabaseIsAClearError() {
        let nowhere = PostgresLocation(host: "127.0.0.1", port: 1, user: "reactor", database: "reactor")
        do {
            _ = try PostgresSessionStore(location: nowhere, node: "a", lease: .seconds(10), historyCapacity: 4)
            Issue.record("a store opened on a closed port")
        } catch {
            #expect(error.kind == .unavailable)
            #expect(error.message.contains("postgres://reactor@127.0.0.1:1/reactor"))
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aLinkPoolRunsCallsFromSeveralThreadsAtOnceEachOnItsOwnConnection() throws {
        let logger = Logger(label: "test")
        let size = 4
        let pool = PostgresLinkPool(size: size, location: location, logger: logger)
        defer { pool.close() }
        let started = DispatchSemaphore(value: 0)
        let allStarted = DispatchSemaphore(value: 0)
        let backends = Locked<[Int32]>([])
        let failures = Atomic<Int>(0)
        let finished = DispatchSemaphore(value: 0)
        // Threads of their own: Dispatch would run only as many calls at once as there are cores.
        for _ in 0..<size {
            Thread {
                defer { finished.signal() }
                do {
                    let backend = try pool.run { connection -> Int32 in
                        started.signal()
                        guard allStarted.wait(timeout: .now() + 10) == .success else { return -1 }
                        return try #require(try connection.run("SELECT pg_backend_pid()", logger: logger).rows.first).decode(Int32.self)
                    }
                    backends.withLock { $0.append(backend) }
                } catch {
                    failures.add(1, ordering: .relaxed)
                }
            }.start()
        }
        // The calls meet: each is inside its own connection's call when all have begun.
        for _ in 0..<size { #expect(started.wait(timeout: .now() + 20) == .success) }
        for _ in 0..<size { allStarted.signal() }
        for _ in 0..<size { finished.wait() }
        #expect(failures.load(ordering: .relaxed) == 0)
        let seen = backends.withLock { $0 }
        #expect(!seen.contains(-1), "the calls ran one after another")
        #expect(Set(seen).count == size)
    }

    @Test(.timeLimit(.minutes(1)))
    func aServerThatStopsAnsweringFailsTheCallWithinTheTimeoutAndTheNextCallConnectsAgain() throws {
        let logger = Logger(label: "test")
        let link = PostgresLink(location: location, logger: logger, timeout: .seconds(2))
        let backendPID: @Sendable (PostgresConnection) throws -> Int32 = { connection in
            try #require(try connection.run("SELECT pg_backend_pid()", logger: logger).rows.first).decode(Int32.self)
        }
        let backend = try link.run(backendPID)
        // The server process serving this connection stops, as a hung server would: the socket
        // stays open, and nothing answers.
        #expect(kill(pid_t(backend), SIGSTOP) == 0)
        defer { kill(pid_t(backend), SIGCONT) }
        let started = ContinuousClock.now
        let error = #expect(throws: SessionStoreError.self) {
            try link.run { connection in try connection.run("SELECT 1", logger: logger) }
        }
        #expect(ContinuousClock.now - started < .seconds(8))
        #expect(error?.kind == .unavailable)
        #expect(error?.message.contains("did not answer within 2.0 seconds") == true)
        kill(pid_t(backend), SIGCONT)
        // The next call connects again, to another server process.
        #expect(try link.run(backendPID) != backend)
    }
}

/// `--store postgres://…` values.
@Suite struct PostgresLocationTests {
    @Test func locationsParseFromURLs() {
        #expect(
            PostgresLocation(url: "postgres://u:p%40ss@db.example:6543/sessions")
                == PostgresLocation(host: "db.example", port: 6543, user: "u", password: "p@ss", database: "sessions"))
        #expect(PostgresLocation(url: "postgresql://u@h/d") == PostgresLocation(host: "h", user: "u", database: "d"))
        #expect(PostgresLocation(url: "postgres://h/d") == nil)
        #expect(PostgresLocation(url: "postgres://u@h") == nil)
        #expect(PostgresLocation(url: "mysql://u@h/d") == nil)
        #expect(PostgresLocation(url: "postgres://u:secret@h/d")?.description == "postgres://u@h:5432/d")
    }
}

/// A PostgreSQL server that takes connections and never answers: a listening socket nobody
/// accepts on, whose connections the kernel completes into its backlog, as it does for a
/// server process that hangs. The link's timeout must bound connecting too.
@Suite struct PostgresLinkHandshakeTests {
    @Test(.timeLimit(.minutes(1)))
    func aServerThatNeverCompletesTheStartupFailsTheCallWithinTheTimeout() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                try #require(bind(listener, raw, length) == 0)
                try #require(listen(listener, 16) == 0)
                try #require(getsockname(listener, raw, &length) == 0)
            }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let hung = PostgresLocation(host: "127.0.0.1", port: port, user: "reactor", database: "reactor")
        let link = PostgresLink(location: hung, logger: Logger(label: "test"), timeout: .seconds(1))
        for _ in 0..<2 {
            let started = ContinuousClock.now
            let error = #expect(throws: SessionStoreError.self) {
                try link.run { connection in try connection.run("SELECT 1", logger: Logger(label: "test")) }
            }
            #expect(ContinuousClock.now - started < .seconds(6))
            #expect(error?.kind == .unavailable)
            // PostgresNIO's connect timeout covers the startup handshake, not only TCP's.
            #expect(error?.message.contains("Connect timeout") == true, "\(error?.message ?? "")")
        }
    }
}
