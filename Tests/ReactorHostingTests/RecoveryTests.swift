// Over 450 lines: one suite, whose tests share its fixtures; a split would repeat them.
import Foundation
import Locking
import Logging
import ReactorCore
import ReactorExamples
import Testing

@testable import ReactorHosting

/// How a host brings stored sessions back: the stored session is written as a crash would have
/// left it, then activated by its first request.
@Suite struct RecoveryTests {
    private let store = InMemorySessionStore(historyCapacity: 16)

    private func makeHost(durability: Durability = .sync) -> ReactorHost {
        var registry = ReactorRegistry()
        registry.register("counter") { CounterReactor(delay: .zero) }
        registry.register("search") { SearchReactor(latency: .zero) }
        var configuration = HostingConfiguration()
        configuration.store = store
        configuration.durability = durability
        configuration.historyCapacity = 16
        return ReactorHost(
            registry: registry, configuration: configuration, logger: Logger(label: "test"),
            errorEvent: { Array("error \($0.actionSequence ?? 0)".utf8) })
    }

    private func state(value: Int, isLoading: Bool, alerts: Int = 0) -> [UInt8] {
        let alert = alerts == 0 ? #"{"count":0,"value":null}"# : #"{"count":\#(alerts),"value":"increased!"}"#
        return Array(#"{"alertMessage":\#(alert),"isLoading":\#(isLoading),"value":\#(value)}"#.utf8)
    }

    /// The instance's state once the actions `sequences` (0: the recovery hook's mutations) have
    /// settled and their states are committed.
    private func settledState(_ host: ReactorHost, _ id: String, after sequences: [UInt64]) async throws -> CounterReactor.State {
        let instance = try #require(try host.instance(id: id))
        for sequence in sequences {
            await withCheckedContinuation { continuation in
                instance.whenSettled(ActionReceipt(sequence: sequence)) { continuation.resume() }
            }
        }
        #expect(!instance.isBusy)
        return try JSONDecoder().decode(CounterReactor.State.self, from: Data(instance.timeline.latest.json))
    }

    @Test func anAcknowledgedActionThatHadNotStartedRunsOnceAfterActivation() async throws {
        _ = try store.commit([
            .create(id: "AAAAAAAAAAAAAAAAAAAAAA", type: "counter", state: state(value: 0, isLoading: false), lastActivity: 0),
            .accept(id: "AAAAAAAAAAAAAAAAAAAAAA", seq: 1, action: Array(#""increase""#.utf8)),
        ])
        let host = makeHost()
        defer { host.shutdown() }
        let recovered = try await settledState(host, "AAAAAAAAAAAAAAAAAAAAAA", after: [1])
        #expect(recovered.value == 1)
        #expect(!recovered.isLoading)
        let stored = try #require(try store.load(id: "AAAAAAAAAAAAAAAAAAAAAA"))
        #expect(stored.pendingActions.isEmpty)
        #expect(stored.version == 4)
        #expect(try JSONDecoder().decode(CounterReactor.State.self, from: Data(stored.state)) == recovered)
    }

    @Test(arguments: [(1, 1), (2, 0), (3, 0)])
    func anInterruptedActionGoesToTheHookWhichFinishesItExactlyOnce(kept: Int, expectedIncrease: Int) async throws {
        // The increase (seq 1) had `kept` of its four states committed when the process died.
        let states = [state(value: 0, isLoading: true), state(value: 1, isLoading: true), state(value: 1, isLoading: false)]
        var writes: [SessionWrite] = [
            .create(id: "BBBBBBBBBBBBBBBBBBBBBB", type: "counter", state: state(value: 0, isLoading: false), lastActivity: 0),
            .accept(id: "BBBBBBBBBBBBBBBBBBBBBB", seq: 1, action: Array(#""increase""#.utf8)),
        ]
        for version in 1...kept {
            writes.append(
                .version(
                    id: "BBBBBBBBBBBBBBBBBBBBBB", version: UInt64(version), state: states[version - 1],
                    startedThrough: 1, producedBy: 1, lastActivity: 0))
        }
        _ = try store.commit(writes)
        let host = makeHost()
        defer { host.shutdown() }
        let recovered = try await settledState(host, "BBBBBBBBBBBBBBBBBBBBBB", after: [0])
        let valueBefore = kept >= 2 ? 1 : 0
        #expect(recovered.value == valueBefore + expectedIncrease)
        #expect(recovered.value == 1)
        #expect(!recovered.isLoading)
        // Reported to every stream that opens, and no longer pending.
        let instance = try #require(try host.instance(id: "BBBBBBBBBBBBBBBBBBBBBB"))
        let subscriber = RecordingSubscriber()
        try instance.timeline.attach(subscriber)
        #expect(subscriber.events == [Array("error 1".utf8)])
        #expect(try store.load(id: "BBBBBBBBBBBBBBBBBBBBBB")?.pendingActions.isEmpty == true)
    }

    /// The names the search finds for `query`, in pages of the search's page size.
    private func searchPages(_ query: String) -> [[String]] {
        let names = PackageCatalog.names.filter { $0.lowercased().contains(query) }
        return stride(from: 0, to: names.count, by: SearchReactor.pageSize).map {
            Array(names[$0..<min($0 + SearchReactor.pageSize, names.count)])
        }
    }

    private func searchState(_ query: String, results: [String], nextPage: Int?, loading: Bool) throws -> [UInt8] {
        var state = SearchReactor.State()
        state.query = query
        state.results = results
        state.nextPage = nextPage
        state.isLoadingNextPage = loading
        return JSONCoding.encodeState(state)
    }

    /// A search session stored as a crash left it: `stored`, then `action` (seq 1) started, with
    /// its first mutation's state `cutOff` kept. Activates it and waits for the recovery hook.
    private func recoverSearch(
        _ id: String, stored: [UInt8], action: String, cutOff: [UInt8],
        host: ReactorHost
    ) async throws -> (any HostedInstance, SearchReactor.State) {
        _ = try store.commit([
            .create(id: id, type: "search", state: stored, lastActivity: 0),
            .accept(id: id, seq: 1, action: Array(action.utf8)),
            .version(id: id, version: 1, state: cutOff, startedThrough: 1, producedBy: 1, lastActivity: 0),
        ])
        let instance = try #require(try host.instance(id: id))
        await withCheckedContinuation { continuation in
            instance.whenSettled(ActionReceipt(sequence: 0)) { continuation.resume() }
        }
        return (instance, try JSONDecoder().decode(SearchReactor.State.self, from: Data(instance.timeline.latest.json)))
    }

    @Test func aSearchCutOffWhileLoadingItsNextPageAppendsItAndStopsLoading() async throws {
        let pages = searchPages("swift")
        try #require(pages.count >= 3)
        let host = makeHost()
        defer { host.shutdown() }
        let (instance, recovered) = try await recoverSearch(
            "IIIIIIIIIIIIIIIIIIIIII", stored: try searchState("swift", results: pages[0], nextPage: 2, loading: false),
            action: #"{"loadNextPage":{}}"#, cutOff: try searchState("swift", results: pages[0], nextPage: 2, loading: true), host: host)
        #expect(recovered.results == pages[0] + pages[1])
        #expect(recovered.nextPage == 3)
        #expect(!recovered.isLoadingNextPage)
        // It loads further pages again.
        let (receipt, _) = try instance.send(actionJSON: Array(#"{"loadNextPage":{}}"#.utf8))
        await withCheckedContinuation { continuation in instance.whenSettled(receipt) { continuation.resume() } }
        let next = try JSONDecoder().decode(SearchReactor.State.self, from: Data(instance.timeline.latest.json))
        #expect(next.results == pages[0] + pages[1] + pages[2])
    }

    @Test func aSearchCutOffBeforeItsResultsSearchesItsQueryAgain() async throws {
        let swift = searchPages("swift")
        let grdb = searchPages("grdb")
        try #require(!grdb.isEmpty)
        let host = makeHost()
        defer { host.shutdown() }
        let (_, recovered) = try await recoverSearch(
            "JJJJJJJJJJJJJJJJJJJJJJ", stored: try searchState("swift", results: swift[0], nextPage: 2, loading: false),
            action: #"{"updateQuery":{"query":"grdb"}}"#, cutOff: try searchState("grdb", results: swift[0], nextPage: 2, loading: false),
            host: host)
        #expect(recovered.query == "grdb")
        #expect(recovered.results == grdb[0])
        #expect(recovered.nextPage == (grdb.count > 1 ? 2 : nil))
        #expect(!recovered.isLoadingNextPage)
    }

    @Test func theRecoveryHooksMutationsComeBeforeTheActionsSentAfterActivation() async throws {
        // The increase (seq 1) was cut off after its first state: the hook changes the value.
        _ = try store.commit([
            .create(id: "EEEEEEEEEEEEEEEEEEEEEE", type: "counter", state: state(value: 0, isLoading: false), lastActivity: 0),
            .accept(id: "EEEEEEEEEEEEEEEEEEEEEE", seq: 1, action: Array(#""increase""#.utf8)),
            .version(
                id: "EEEEEEEEEEEEEEEEEEEEEE", version: 1, state: state(value: 0, isLoading: true),
                startedThrough: 1, producedBy: 1, lastActivity: 0),
        ])
        let host = makeHost()
        defer { host.shutdown() }
        // The first request's action, waited for: its state already holds the hook's change, as
        // the hook's mutations were applied before it (not in a task that may run after it).
        let instance = try #require(try host.instance(id: "EEEEEEEEEEEEEEEEEEEEEE"))
        let (receipt, _) = try instance.send(actionJSON: Array(#""increase""#.utf8))
        await withCheckedContinuation { continuation in
            instance.whenSettled(receipt) { continuation.resume() }
        }
        let settled = try JSONDecoder().decode(CounterReactor.State.self, from: Data(instance.timeline.latest.json))
        #expect(settled.value == 2)
        #expect(!settled.isLoading)
    }

    @Test func aRestoredInstanceResumesItsVersionsAndReplaysItsStoredHistory() async throws {
        _ = try store.commit([
            .create(id: "CCCCCCCCCCCCCCCCCCCCCC", type: "counter", state: state(value: 0, isLoading: false), lastActivity: 0),
            .version(
                id: "CCCCCCCCCCCCCCCCCCCCCC", version: 1, state: state(value: 0, isLoading: true),
                startedThrough: 1, producedBy: 1, lastActivity: 0),
            .version(
                id: "CCCCCCCCCCCCCCCCCCCCCC", version: 2, state: state(value: 1, isLoading: true),
                startedThrough: 1, producedBy: 1, lastActivity: 0),
        ])
        let host = makeHost()
        defer { host.shutdown() }
        let instance = try #require(try host.instance(id: "CCCCCCCCCCCCCCCCCCCCCC"))
        #expect(instance.timeline.latest.version == 2)
        #expect(instance.timeline.states(after: 0)?.map(\.version) == [1, 2])
        #expect(instance.timeline.states(after: 0)?.first?.json == state(value: 0, isLoading: true))
        let (receipt, ticket) = try instance.send(actionJSON: Array(#""increase""#.utf8))
        #expect(receipt.sequence == 2)
        #expect(ticket != nil)
        _ = try await settledState(host, "CCCCCCCCCCCCCCCCCCCCCC", after: [receipt.sequence])
        #expect(instance.timeline.latest.version == 6)
        #expect(instance.timeline.states(after: 0)?.map(\.version) == [1, 2, 3, 4, 5, 6])
    }

    @Test func anInstanceLeavesMemoryOnlyOnceItsWritesAreCommittedEvenWithAsyncDurability() async throws {
        let clock = Locked<UInt64>(1_000_000_000)
        var registry = ReactorRegistry()
        registry.register("counter") { CounterReactor(delay: .zero) }
        var configuration = HostingConfiguration()
        configuration.store = store
        configuration.durability = .async(flushInterval: .seconds(3600))
        configuration.passivateAfter = .seconds(60)
        configuration.now = { clock.withLock { $0 } }
        let host = ReactorHost(
            registry: registry, configuration: configuration, logger: Logger(label: "test"),
            errorEvent: { _ in [] })
        defer { host.shutdown() }
        let (instance, ticket) = try host.create(try #require(host.registry.type(named: "counter")))
        #expect(ticket == nil)
        for _ in 0..<2 { _ = try instance.send(actionJSON: Array(#""increase""#.utf8)) }
        #expect(instance.timeline.latest.version == 8)
        clock.withLock { $0 += 61_000_000_000 }
        #expect(host.passivateIdle() == 1)
        await withCheckedContinuation { left in host.committer!.afterCommit { left.resume() } }
        #expect(host.table.instance(instance.id) == nil)
        #expect(try store.load(id: instance.id)?.version == 8)
        let activated = try #require(try host.instance(id: instance.id))
        #expect(activated !== instance)
        #expect(activated.timeline.latest.version == 8)
        let state = try JSONDecoder().decode(CounterReactor.State.self, from: Data(activated.timeline.latest.json))
        #expect(state.value == 2)
    }

    /// A counter host over `store` expiring after `idleTimeout`, whose wall clock reads
    /// `wallClock` (so it starts at the clock's value).
    private func makeHost(store: any SessionStore, idleTimeout: Duration, wallClock: Locked<Int64>) -> ReactorHost {
        var registry = ReactorRegistry()
        registry.register("counter") { CounterReactor(delay: .zero) }
        var configuration = HostingConfiguration()
        configuration.store = store
        configuration.idleTimeout = idleTimeout
        configuration.wallClock = { wallClock.withLock { $0 } }
        return ReactorHost(
            registry: registry, configuration: configuration, logger: Logger(label: "test"),
            errorEvent: { _ in [] })
    }

    @Test func aSessionActivatedWhileTheStoreExpiresItLeavesMemoryToo() throws {
        let id = "DDDDDDDDDDDDDDDDDDDDDD"
        _ = try store.commit([.create(id: id, type: "counter", state: state(value: 0, isLoading: false), lastActivity: 0)])
        // A request activates the session after the host listed what is in memory, while the
        // store is deleting the sessions idle since before the cutoff.
        let hostReference = Locked<ReactorHost?>(nil)
        let racing = HookedStore(store, beforeDeleteIdle: { _ = try? hostReference.withLock { $0 }?.instance(id: id) })
        let wallClock = Locked<Int64>(3_600_000)
        let host = makeHost(store: racing, idleTimeout: .seconds(60), wallClock: wallClock)
        defer { host.shutdown() }
        hostReference.withLock { $0 = host }
        wallClock.withLock { $0 += 60_000 }  // the host has run for the idle timeout

        #expect(host.expireStoredSessions() == 1)
        #expect(try store.load(id: id) == nil)
        // Memory keeps nothing the store no longer has.
        #expect(host.table.instance(id) == nil)
        #expect(try host.instance(id: id) == nil)
    }

    @Test func timeTheServiceWasDownDoesNotCountAsIdle() throws {
        // One left an hour before this start, with an idle timeout of 10 minutes; the other was
        // active 2 minutes after the start.
        _ = try store.commit([
            .create(id: "KKKKKKKKKKKKKKKKKKKKKK", type: "counter", state: state(value: 0, isLoading: false), lastActivity: 0),
            .create(id: "LLLLLLLLLLLLLLLLLLLLLL", type: "counter", state: state(value: 0, isLoading: false), lastActivity: 3_720_000),
        ])
        let wallClock = Locked<Int64>(3_600_000)
        let host = makeHost(store: store, idleTimeout: .seconds(600), wallClock: wallClock)
        defer { host.shutdown() }
        wallClock.withLock { $0 += 599_999 }
        #expect(host.expireStoredSessions() == 0)
        #expect(try store.contains(id: "KKKKKKKKKKKKKKKKKKKKKK"))
        // Once the host has run for the idle timeout, the first is idle that long; the second,
        // active since, is not yet.
        wallClock.withLock { $0 += 1 }
        #expect(host.expireStoredSessions() == 1)
        #expect(try !store.contains(id: "KKKKKKKKKKKKKKKKKKKKKK"))
        #expect(try store.contains(id: "LLLLLLLLLLLLLLLLLLLLLL"))
    }

    @Test func concurrentRequestsActivateASessionOnceAndReplayItsActionOnce() async throws {
        let id = "EEEEEEEEEEEEEEEEEEEEEE"
        _ = try store.commit([
            .create(id: id, type: "counter", state: state(value: 0, isLoading: false), lastActivity: 0),
            .accept(id: id, seq: 1, action: Array(#""increase""#.utf8)),
        ])
        // Each load waits (up to a bound) for a second one, so two activations would overlap.
        let slow = SlowLoads()
        var registry = ReactorRegistry()
        registry.register("counter") { CounterReactor(delay: .zero) }
        var configuration = HostingConfiguration()
        configuration.store = HookedStore(store, beforeLoad: slow.arrive)
        let host = ReactorHost(
            registry: registry, configuration: configuration, logger: Logger(label: "test"),
            errorEvent: { _ in [] })
        defer { host.shutdown() }
        async let first = Task.detached { try host.instance(id: id) }.value
        async let second = Task.detached { try host.instance(id: id) }.value
        let (a, b) = (try #require(try await first), try #require(try await second))
        #expect(a === b)
        #expect(slow.loads == 1)
        let recovered = try await settledState(host, id, after: [1])
        #expect(recovered.value == 1)
        #expect(host.table.instance(id) === a)
        #expect(try store.load(id: id)?.pendingActions.isEmpty == true)
    }

    @Test func anActionsRecordReachesTheStoreBeforeAnythingItProduced() async throws {
        // Applied on the sending thread (no reactor threads), the action produces its first
        // states before `send` returns: its record must still be queued ahead of them, or a
        // failed commit of the record could leave its effect stored though the action was refused.
        // The action then waits out its delay, so its record is committed (an action settled in
        // the batch of its record is not written).
        let committed = Locked<[SessionWrite]>([])
        let recording = HookedStore(store, beforeCommit: { writes in committed.withLock { $0 += writes } })
        var registry = ReactorRegistry()
        registry.register("counter") { CounterReactor(delay: .seconds(3_600)) }
        var configuration = HostingConfiguration()
        configuration.store = recording
        configuration.reactorThreads = 0
        let host = ReactorHost(
            registry: registry, configuration: configuration, logger: Logger(label: "test"),
            errorEvent: { _ in [] })
        defer { host.shutdown() }
        let (instance, _) = try host.create(try #require(host.registry.type(named: "counter")))
        let (receipt, _) = try instance.send(actionJSON: Array(#""increase""#.utf8))
        let committer = try #require(host.committer)
        await withCheckedContinuation { queued in committer.afterQueuedWrites { _ in queued.resume() } }
        let writes = committed.withLock { $0 }
        let accepted = try #require(
            writes.firstIndex {
                if case .accept(_, let seq, _, _) = $0 { seq == receipt.sequence } else { false }
            })
        let produced = try #require(
            writes.firstIndex {
                if case .version(_, _, _, _, let producedBy, _) = $0 { producedBy == receipt.sequence } else { false }
            })
        #expect(accepted < produced)
    }

    @Test func deletedStaysDeletedAndUnknownIdsAreNotFound() throws {
        let host = makeHost()
        defer { host.shutdown() }
        let type = try #require(host.registry.type(named: "counter"))
        let (instance, _) = try host.create(type)
        let id = instance.id
        #expect(try host.delete(id: id) != nil)
        let committed = DispatchSemaphore(value: 0)
        host.committer!.afterQueuedWrites { _ in committed.signal() }
        committed.wait()
        #expect(try store.load(id: id) == nil)
        #expect(try host.instance(id: id) == nil)
        #expect(try host.instance(id: "DDDDDDDDDDDDDDDDDDDDDD") == nil)
    }

    @Test func aStateStoredBeforeItsTypeGainedKeysTakesThemFromTheInitialState() async throws {
        // An earlier counter had only a value.
        let older = Array(#"{"value":5}"#.utf8)
        _ = try store.commit([.create(id: "FFFFFFFFFFFFFFFFFFFFFF", type: "counter", state: older, lastActivity: 0)])
        let host = makeHost()
        defer { host.shutdown() }
        let instance = try #require(try host.instance(id: "FFFFFFFFFFFFFFFFFFFFFF"))
        #expect(instance.timeline.latest.version == 0)
        #expect(instance.timeline.latest.json == state(value: 5, isLoading: false))
        // Reading it changed nothing stored; the next version is stored whole.
        #expect(try store.load(id: "FFFFFFFFFFFFFFFFFFFFFF")?.state == older)
        let (receipt, _) = try instance.send(actionJSON: Array(#""increase""#.utf8))
        #expect(try await settledState(host, "FFFFFFFFFFFFFFFFFFFFFF", after: [receipt.sequence]).value == 6)
        let committed = DispatchSemaphore(value: 0)
        host.committer!.afterQueuedWrites { _ in committed.signal() }
        committed.wait()
        let stored = try #require(try store.load(id: "FFFFFFFFFFFFFFFFFFFFFF"))
        #expect(stored.state == state(value: 6, isLoading: false, alerts: 1))
    }

    @Test(arguments: [
        ("counter", #"{"alertMessage":{"count":0,"value":null},"isLoading":false,"value":"five"}"#, "wrong type at 'value'"),
        ("counter", #"[5]"#, "wrong type at the top level"),
        ("abacus", #"{"beads":3}"#, "its type 'abacus' is not registered by this build"),
    ])
    func aStoredSessionThatStillDoesNotDecodeIsRefusedAndKeptAsItWas(type: String, json: String, reason: String) throws {
        let stored = Array(json.utf8)
        _ = try store.commit([
            .create(id: "GGGGGGGGGGGGGGGGGGGGGG", type: type, state: stored, lastActivity: 0),
            .accept(id: "GGGGGGGGGGGGGGGGGGGGGG", seq: 1, action: Array(#""increase""#.utf8)),
        ])
        let host = makeHost()
        defer { host.shutdown() }
        for _ in 1...2 {
            #expect {
                _ = try host.instance(id: "GGGGGGGGGGGGGGGGGGGGGG")
            } throws: { error in
                guard case HostingError.storedSessionIncompatible(let detail) = error else { return false }
                return detail.contains(reason)
            }
        }
        let kept = try #require(try store.load(id: "GGGGGGGGGGGGGGGGGGGGGG"))
        #expect(kept.state == stored)
        #expect(kept.type == type)
        #expect(kept.pendingActions.map(\.seq) == [1])
    }

    @Test func anAcknowledgedActionThisBuildCannotDecodeIsReportedAndNotApplied() async throws {
        // Seq 1 is a case an earlier counter had; seq 2 is one it still has.
        _ = try store.commit([
            .create(id: "HHHHHHHHHHHHHHHHHHHHHH", type: "counter", state: state(value: 3, isLoading: false), lastActivity: 0),
            .accept(id: "HHHHHHHHHHHHHHHHHHHHHH", seq: 1, action: Array(#""reset""#.utf8)),
            .accept(id: "HHHHHHHHHHHHHHHHHHHHHH", seq: 2, action: Array(#""increase""#.utf8)),
        ])
        let host = makeHost()
        defer { host.shutdown() }
        let recovered = try await settledState(host, "HHHHHHHHHHHHHHHHHHHHHH", after: [2])
        #expect(recovered.value == 4)
        let instance = try #require(try host.instance(id: "HHHHHHHHHHHHHHHHHHHHHH"))
        let subscriber = RecordingSubscriber()
        try instance.timeline.attach(subscriber)
        #expect(subscriber.events == [Array("error 1".utf8)])
        let committed = DispatchSemaphore(value: 0)
        host.committer!.afterQueuedWrites { _ in committed.signal() }
        committed.wait()
        #expect(try store.load(id: "HHHHHHHHHHHHHHHHHHHHHH")?.pendingActions.isEmpty == true)
    }
}

private final class RecordingSubscriber: TimelineSubscriber, @unchecked Sendable {
    // `@unchecked Sendable`: the test reads `events` only after every `enqueue` has returned on
    // its own thread (attach delivers the retained events synchronously).
    var events: [[UInt8]] = []
    func wake() {}
    func enqueue(event: [UInt8]) { events.append(event) }
}

/// Has each load wait up to 300 ms for another load to begin, and counts the loads.
private final class SlowLoads: Sendable {
    private let started = Locked(0)
    private let arrivals = DispatchSemaphore(value: 0)

    var loads: Int { started.withLock { $0 } }

    /// Called as a load begins.
    func arrive() {
        let count = started.withLock { count -> Int in
            count += 1
            return count
        }
        if count == 1 {
            _ = arrivals.wait(timeout: .now() + .milliseconds(300))
        } else {
            arrivals.signal()
        }
    }
}
