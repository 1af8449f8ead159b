import Dispatch
import Foundation
import Locking
import Logging
import ReactorCore
import Testing

@testable import ReactorHosting

/// A restart counts in the store each attempt to run a pending action again, before the action
/// runs; an action still pending after an attempt (the process ended again while it ran, perhaps
/// because of it: a trap no process survives) is reported and never run again, so that one
/// action cannot end the process at every start. (`RecoveryAttemptsOnDiskTests` runs the whole
/// story on SQLite.)
@Suite struct RecoveryAttemptTests {
    private let store = InMemorySessionStore(historyCapacity: 16)
    private let id = "AAAAAAAAAAAAAAAAAAAAAA"

    private func makeHost(_ reactor: @escaping @Sendable () -> ProbeReactor) -> ReactorHost {
        var registry = ReactorRegistry()
        registry.register("probe") { reactor() }
        var configuration = HostingConfiguration()
        configuration.store = store
        configuration.historyCapacity = 16
        return ReactorHost(
            registry: registry, configuration: configuration, logger: Logger(label: "test"),
            errorEvent: { Array("error \($0.actionSequence ?? 0) \($0.errorType)".utf8) })
    }

    /// Stores the session as a crash left it: action 1 accepted, and started (`interrupted`) or not;
    /// `attempts` restarts had begun to run it again.
    private func storeSession(interrupted: Bool, attempts: Int) throws {
        var writes: [SessionWrite] = [
            .create(id: id, type: "probe", state: Array(#"{"added":0,"recovered":0}"#.utf8), lastActivity: 0),
            .accept(id: id, seq: 1, action: Array(#""add""#.utf8)),
        ]
        if interrupted {
            writes.append(
                .version(
                    id: id, version: 1, state: Array(#"{"added":0,"recovered":0}"#.utf8), startedThrough: 1, producedBy: 0,
                    lastActivity: 0))
        }
        writes += Array(repeating: .attempt(id: id, seq: 1), count: attempts)
        _ = try store.commit(writes)
    }

    /// Waits until everything the host queued is committed.
    private func committed(_ host: ReactorHost) {
        let done = DispatchSemaphore(value: 0)
        host.committer!.afterQueuedWrites { _ in done.signal() }
        done.wait()
    }

    private func state(of instance: any HostedInstance) throws -> ProbeReactor.State {
        try JSONDecoder().decode(ProbeReactor.State.self, from: Data(instance.timeline.latest.json))
    }

    /// An action sent again: its record stays until it settles, so `mutate` sees it. (An
    /// interrupted action's record is settled as its recovery hook is called, which then may or
    /// may not still find it.)
    @Test func theAttemptIsInTheStoreBeforeTheActionRunsAgain() async throws {
        try storeSession(interrupted: false, attempts: 0)
        let store = self.store
        let id = self.id
        // What the store held of action 1's record each time `mutate` or the recovery hook ran.
        let seen = Locked<[Int]>([])
        let host = makeHost {
            ProbeReactor { seen.withLock { $0.append((try? store.load(id: id))?.pendingActions.first?.attempts ?? -1) } }
        }
        defer { host.shutdown() }
        let instance = try #require(try host.instance(id: id))
        await withCheckedContinuation { continuation in
            instance.whenSettled(ActionReceipt(sequence: 1)) { continuation.resume() }
        }
        #expect(seen.withLock { $0 } == [1])
        #expect(try state(of: instance) == .init(added: 1, recovered: 0))
        committed(host)
        #expect(try store.load(id: id)?.pendingActions.isEmpty == true)
    }

    /// A build that cannot decode the session (its state, here) runs none of its actions, so it
    /// counts no attempt: the build that can, deployed again, runs them.
    @Test func anActivationThatFailsCountsNoAttempt() throws {
        _ = try store.commit([
            .create(id: id, type: "probe", state: Array(#"{"added":"many","recovered":0}"#.utf8), lastActivity: 0),
            .accept(id: id, seq: 1, action: Array(#""add""#.utf8)),
        ])
        let host = makeHost { ProbeReactor {} }
        defer { host.shutdown() }
        #expect(throws: HostingError.self) { try host.instance(id: id) }
        #expect(try store.load(id: id)?.pendingActions.map(\.attempts) == [0])
    }

    @Test(arguments: [false, true])
    func anActionStillPendingAfterAnAttemptIsReportedAndNeverRunAgain(interrupted: Bool) async throws {
        try storeSession(interrupted: interrupted, attempts: 1)
        let runs = Locked(0)
        let host = makeHost { ProbeReactor { runs.withLock { $0 += 1 } } }
        defer { host.shutdown() }
        let instance = try #require(try host.instance(id: id))
        committed(host)
        #expect(runs.withLock { $0 } == 0)
        #expect(try state(of: instance) == .init(added: 0, recovered: 0))
        #expect(try store.load(id: id)?.pendingActions.isEmpty == true)
        // Reported to every stream that opens.
        let subscriber = EventRecorder()
        try instance.timeline.attach(subscriber)
        #expect(subscriber.events.withLock { $0 } == [Array("error 1 AbandonedAction".utf8)])
        // The session goes on: a new action runs.
        let (receipt, _) = try instance.send(actionJSON: Array(#""add""#.utf8))
        await withCheckedContinuation { continuation in instance.whenSettled(receipt) { continuation.resume() } }
        #expect(runs.withLock { $0 } == 1)
        #expect(try state(of: instance) == .init(added: 1, recovered: 0))
    }
}

/// Adds; its recovery hook counts the actions it is handed. `ran` is called each time `mutate`
/// or the hook runs.
final class ProbeReactor: Reactor {
    enum Action: String, Codable, Sendable { case add }
    enum Mutation: Sendable {
        case add
        case recover(Int)
    }
    struct State: Codable, Sendable, Equatable {
        var added = 0
        var recovered = 0
    }

    let initialState = State()
    let runtime = ReactorRuntime<ProbeReactor>()
    private let ran: @Sendable () -> Void

    init(ran: @escaping @Sendable () -> Void) {
        self.ran = ran
    }

    func mutate(action: Action) -> Mutations<Mutation> {
        ran()
        return .just(.add)
    }

    func recover(interrupted actions: [InterruptedAction<Action>]) -> Mutations<Mutation> {
        ran()
        return .just(.recover(actions.count))
    }

    func reduce(state: State, mutation: Mutation) -> State {
        var state = state
        switch mutation {
        case .add: state.added += 1
        case .recover(let count): state.recovered += count
        }
        return state
    }
}

private final class EventRecorder: TimelineSubscriber {
    let events = Locked<[[UInt8]]>([])
    func wake() {}
    func enqueue(event: [UInt8]) { events.withLock { $0.append(event) } }
}
