import Dispatch
import Foundation
import Locking
import Logging
import ReactorCore
import ReactorHosting
import TestSupport
import Testing

@testable import ReactorStoreSQLite

/// The attempt a restart counts before it runs a session's pending action again is committed to
/// the file before the action runs: a process that ends while the action runs leaves the next one
/// the count, and that one reports the action instead of running it, so one action cannot end
/// the server at every start. A test cannot end its own process, so "the process ended" is the
/// store as it was on disk at that moment, taken with `backup`, which is what the next process
/// would open.
@Suite struct RecoveryAttemptsOnDiskTests {
    private let scratch: ScratchDirectory
    private let id = "AAAAAAAAAAAAAAAAAAAAAA"

    init() throws {
        scratch = try ScratchDirectory("recovery-attempts")
    }

    private func makeHost(store: SQLiteSessionStore, _ reactor: @escaping @Sendable () -> HeldCounter) -> ReactorHost {
        var registry = ReactorRegistry()
        registry.register("held") { reactor() }
        var configuration = HostingConfiguration()
        configuration.store = store
        configuration.historyCapacity = 8
        return ReactorHost(
            registry: registry, configuration: configuration, logger: Logger(label: "test"),
            errorEvent: { Array("error \($0.actionSequence ?? 0) \($0.errorType)".utf8) })
    }

    @Test func anActionRunningAgainWhenTheProcessEndsIsReportedByTheNextProcessAndNotRun() async throws {
        let path = scratch.path("sessions.sqlite")
        // As a crash left it: action 1 acknowledged, not started.
        do {
            let store = try SQLiteSessionStore(path: path, historyCapacity: 8)
            _ = try store.commit([
                .create(id: id, type: "held", state: Array(#"{"value":0}"#.utf8), lastActivity: 0),
                .accept(id: id, seq: 1, action: Array(#""increase""#.utf8)),
            ])
            store.close()
        }
        // The first process after it runs the action again, which holds (as it would while it
        // ended that process).
        let running = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let firstStore = try SQLiteSessionStore(path: path, historyCapacity: 8)
        let first = makeHost(store: firstStore) {
            HeldCounter {
                running.signal()
                gate.wait()
            }
        }
        let activated = DispatchSemaphore(value: 0)
        let id = self.id
        // `mutate` may run on the thread that activates the session: not the test's.
        Thread.detachNewThread {
            _ = try? first.instance(id: id)
            activated.signal()
        }
        defer {
            gate.signal()
            _ = activated.wait(timeout: .now() + 10)
            first.shutdown()
            firstStore.close()
        }
        try #require(running.wait(timeout: .now() + 10) == .success)
        // The process ends here.
        let ended = scratch.path("ended.sqlite")
        _ = try SQLiteBackup.copy(from: path, to: ended)

        let nextStore = try SQLiteSessionStore(path: ended, historyCapacity: 8)
        defer { nextStore.close() }
        #expect(try nextStore.load(id: id)?.pendingActions.map(\.attempts) == [1])
        let runs = Locked(0)
        let next = makeHost(store: nextStore) { HeldCounter { runs.withLock { $0 += 1 } } }
        defer { next.shutdown() }
        let instance = try #require(try next.instance(id: id))
        let committed = DispatchSemaphore(value: 0)
        next.committer!.afterQueuedWrites { _ in committed.signal() }
        committed.wait()
        #expect(runs.withLock { $0 } == 0)
        #expect(instance.timeline.latest.json == Array(#"{"value":0}"#.utf8))
        #expect(try nextStore.load(id: id)?.pendingActions.isEmpty == true)
    }
}

/// A counter whose `mutate` calls `ran` first.
final class HeldCounter: Reactor {
    enum Action: String, Codable, Sendable { case increase }
    typealias Mutation = Action
    struct State: Codable, Sendable, Equatable { var value = 0 }

    let initialState = State()
    let runtime = ReactorRuntime<HeldCounter>()
    private let ran: @Sendable () -> Void

    init(ran: @escaping @Sendable () -> Void) {
        self.ran = ran
    }

    func mutate(action: Action) -> Mutations<Mutation> {
        ran()
        return .just(action)
    }

    func reduce(state: State, mutation: Mutation) -> State {
        State(value: state.value + 1)
    }
}
