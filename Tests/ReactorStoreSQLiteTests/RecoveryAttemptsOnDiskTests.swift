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

    /// An action run again whose run cannot commit (the disk is full, so its instance leaves
    /// memory after each try) stays pending: the instance dropped does not settle it afterwards
    /// (its reactor thread may try). And it did not end the process: a later activation in the
    /// same process runs it again without counting it twice, and once the process stops cleanly
    /// the next one runs it too, rather than report it abandoned. Nothing acknowledged is lost.
    @Test func anActionRunAgainThatCouldNotCommitIsRunByTheNextProcess() async throws {
        let path = scratch.path("sessions.sqlite")
        let id = self.id
        let runs = Locked(0)
        do {
            let full = try SQLiteSessionStore(path: path, historyCapacity: 8, maxPageCount: 60)
            // Action 1 acknowledged, not started; then the file filled to its cap, down to the
            // last rows that fit, so that a grown state finds no room.
            _ = try full.commit([
                .create(id: id, type: "held", state: Array(#"{"value":0}"#.utf8), lastActivity: 0),
                .accept(id: id, seq: 1, action: Array(#""increase""#.utf8)),
            ])
            for size in [1_500, 100, 10] {
                var filler = 0
                while (try? full.commit([
                    .create(
                        id: "filler-\(size)-\(filler)", type: "held", state: Array(repeating: UInt8(ascii: " "), count: size),
                        lastActivity: 0)
                ])) != nil {
                    filler += 1
                }
            }
            let host = makeHost(store: full) { HeldCounter(growth: 50_000) { runs.withLock { $0 += 1 } } }
            for attempt in 1...2 {
                // Each activation runs the action again; its state cannot be committed, and the
                // instance leaves memory (or the activation fails, when that came first).
                do {
                    let instance = try #require(try host.instance(id: id))
                    await withCheckedContinuation { continuation in
                        instance.whenSettled(ActionReceipt(sequence: 1)) { _ in continuation.resume() }
                    }
                } catch HostingError.storeUnavailable {}
                await withCheckedContinuation { continuation in
                    host.committer!.afterQueuedWrites { _ in continuation.resume() }
                }
                #expect(runs.withLock { $0 } == attempt)
                #expect(host.table.count == 0)
                // Counted once, by the first: this process is alive, so no run of it ended one.
                #expect(try full.load(id: id)?.pendingActions.map(\.attempts) == [1])
            }
            host.shutdown()
        }
        // The process stopped cleanly: it took its attempt back.
        let roomy = try SQLiteSessionStore(path: path, historyCapacity: 8)
        #expect(try roomy.load(id: id)?.pendingActions.map(\.attempts) == [0])
        let next = makeHost(store: roomy) { HeldCounter(growth: 50_000) { runs.withLock { $0 += 1 } } }
        defer { next.shutdown() }
        let instance = try #require(try next.instance(id: id))
        await withCheckedContinuation { continuation in
            instance.whenSettled(ActionReceipt(sequence: 1)) { _ in continuation.resume() }
        }
        #expect(runs.withLock { $0 } == 3)
        #expect(try JSONDecoder().decode(HeldCounter.State.self, from: Data(instance.timeline.latest.json)).value == 1)
    }
}

/// A counter whose `mutate` calls `ran` first. With a `growth`, each increase also lengthens
/// its state's `padding` by that many bytes.
final class HeldCounter: Reactor {
    enum Action: String, Codable, Sendable { case increase }
    typealias Mutation = Action
    struct State: Codable, Sendable, Equatable {
        var padding: String?
        var value = 0
    }

    let initialState = State()
    let runtime = ReactorRuntime<HeldCounter>()
    private let growth: Int
    private let ran: @Sendable () -> Void

    init(growth: Int = 0, ran: @escaping @Sendable () -> Void) {
        self.growth = growth
        self.ran = ran
    }

    func mutate(action: Action) -> Mutations<Mutation> {
        ran()
        return .just(action)
    }

    func reduce(state: State, mutation: Mutation) -> State {
        let padding = growth > 0 ? (state.padding ?? "") + String(repeating: "x", count: growth) : nil
        return State(padding: padding, value: state.value + 1)
    }
}
