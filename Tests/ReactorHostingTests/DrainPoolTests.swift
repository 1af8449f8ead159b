import Dispatch
import Foundation
import Locking
import ReactorCore
import Synchronization
import TestSupport
import Testing

@testable import ReactorHosting

#if canImport(Glibc)
    import Glibc
#endif

/// Adds numbers; `.hold` blocks inside `mutate` until its gate opens, as a `mutate` that loops
/// or blocks would.
final class GatedReactor: Reactor {
    enum Action: Codable, Sendable {
        case add(Int)
        case hold
    }
    typealias Mutation = Action
    struct State: Codable, Sendable, Equatable { var total = 0, applied: [Int] = [] }

    let initialState = State()
    let runtime = ReactorRuntime<GatedReactor>()
    /// Opened by the test; `.hold` waits on it.
    let gate = DispatchSemaphore(value: 0)
    /// Signalled when `.hold` is inside `mutate`.
    let holding = DispatchSemaphore(value: 0)
    /// Names of the threads `mutate` ran on.
    let mutateThreads = Locked<Set<String>>([])

    func mutate(action: Action) -> Mutations<Mutation> {
        _ = mutateThreads.withLock { $0.insert(currentThreadName()) }
        if case .hold = action {
            holding.signal()
            gate.wait()
        }
        return .just(action)
    }

    func reduce(state: State, mutation: Mutation) -> State {
        guard case .add(let value) = mutation else { return state }
        var state = state
        state.total += value
        state.applied.append(value)
        return state
    }
}

private func currentThreadName() -> String {
    "\(pthread_self())"
}

/// Suspends until `receipt`'s action is settled.
private func settled<R: Reactor>(_ reactor: R, _ receipt: ActionReceipt) async {
    await withCheckedContinuation { continuation in
        reactor.whenSettled(receipt) { continuation.resume() }
    }
}

@Suite struct DrainPoolTests {
    @Test func actionsFromManyThreadsAreAppliedOnThePoolExactlyOnceAndInOrder() async {
        let pool = DrainPool(size: 2, stallTimeout: nil)
        defer { pool.shutdown() }
        let reactors = (0..<4).map { _ in GatedReactor() }
        for reactor in reactors { reactor.applyActions(on: pool) }
        let senders = 8
        let perSender = 500
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<senders {
                group.addTask {
                    var last: [ActionReceipt] = []
                    for index in 0..<perSender {
                        // Each sender's values rise, so per-sender order is visible in `applied`.
                        let value = sender * 1_000_000 + index
                        last = reactors.map { $0.send(.add(value)) }
                    }
                    for (reactor, receipt) in zip(reactors, last) { await settled(reactor, receipt) }
                }
            }
        }
        let expectedTotal = (0..<senders).reduce(0) { total, sender in
            total + (0..<perSender).reduce(0) { $0 + sender * 1_000_000 + $1 }
        }
        for reactor in reactors {
            let state = reactor.currentState
            #expect(state.total == expectedTotal)
            #expect(state.applied.count == senders * perSender)
            for sender in 0..<senders {
                let mine = state.applied.filter { $0 / 1_000_000 == sender }
                #expect(mine == mine.sorted(), "sender \(sender)'s actions were applied out of order")
            }
            #expect(reactor.currentUpdate.version == UInt64(senders * perSender))
        }
    }

    @Test func sendReturnsBeforeMutateRuns() async throws {
        let pool = DrainPool(size: 1, stallTimeout: nil)
        defer { pool.shutdown() }
        let reactor = GatedReactor()
        reactor.applyActions(on: pool)
        // Sent from a thread of its own: were the sender to apply the action, `send` would
        // not return until the gate opened, and the wait for it would time out.
        let sender = Locked("")
        #expect(
            await finishes {
                sender.withLock { $0 = currentThreadName() }
                reactor.send(.hold)
            }, "send did not return while mutate was blocked")
        let queued = reactor.send(.add(7))
        #expect(await wait(for: reactor.holding))
        #expect(reactor.currentState.total == 0)
        reactor.gate.signal()
        await settled(reactor, queued)
        #expect(reactor.currentState.total == 7)
        let senderName = sender.withLock { $0 }
        #expect(!reactor.mutateThreads.withLock { $0.contains(senderName) })
    }

    @Test func aStalledTurnIsReplacedAndDoesNotHoldUpOtherReactors() async throws {
        let pool = DrainPool(size: 1, maximumThreads: 4, stallTimeout: nil)
        defer { pool.shutdown() }
        let stuck = GatedReactor()
        let other = GatedReactor()
        let reports = Locked<[Bool]>([])
        stuck.applyActions(on: pool) { stalled in reports.withLock { $0.append(stalled) } }
        other.applyActions(on: pool)

        let queuedBehind = stuck.send(.hold)
        #expect(await wait(for: stuck.holding))
        // The watchdog's first look records the turn; the second finds it still there.
        pool.checkForStalls()
        #expect(!stuck.isStalled)
        pool.checkForStalls()
        #expect(stuck.isStalled)
        #expect(reports.withLock { $0 } == [true])
        #expect(pool.threadCount == 2)
        #expect(pool.stalledThreadCount == 1)
        #expect(stuck.sendUnlessStalled(.add(1)) == nil, "a stalled reactor must refuse actions")

        // The replacement thread applies the other reactor's actions.
        await settled(other, other.send(.add(5)))
        #expect(other.currentState.total == 5)
        #expect(other.sendUnlessStalled(.add(1)) != nil)

        // When the stalled call returns, the reactor takes actions again and the extra thread retires.
        stuck.gate.signal()
        await settled(stuck, queuedBehind)
        try #require(await eventually { !stuck.isStalled && pool.threadCount == 1 })
        #expect(reports.withLock { $0 } == [true, false])
        let receipt = try #require(stuck.sendUnlessStalled(.add(2)))
        await settled(stuck, receipt)
        #expect(stuck.currentState.applied == [2], "the refused action must not have been applied")
    }

    @Test func aThreadBackFromAStallStaysWhenTheOthersAreStalled() async throws {
        // One thread taking work, at most two: the second stall gets no replacement.
        let pool = DrainPool(size: 1, maximumThreads: 2, stallTimeout: nil)
        defer { pool.shutdown() }
        let first = GatedReactor()
        let second = GatedReactor()
        let other = GatedReactor()
        for reactor in [first, second, other] { reactor.applyActions(on: pool) }

        let firstQueued = first.send(.hold)
        #expect(await wait(for: first.holding))
        pool.checkForStalls()
        pool.checkForStalls()
        second.send(.hold)
        #expect(await wait(for: second.holding))
        pool.checkForStalls()
        pool.checkForStalls()
        #expect(pool.threadCount == 2)
        #expect(pool.stalledThreadCount == 2)

        // The first thread comes back while the other is still stalled: it must keep working.
        first.gate.signal()
        await settled(first, firstQueued)
        other.send(.add(5))
        try #require(await eventually { other.currentState.total == 5 })
        second.gate.signal()
    }

    @Test func theWatchdogFindsAStallByItself() async throws {
        let pool = DrainPool(size: 1, stallTimeout: .milliseconds(20))
        defer { pool.shutdown() }
        let stuck = GatedReactor()
        stuck.applyActions(on: pool)
        stuck.send(.hold)
        #expect(await wait(for: stuck.holding))
        try #require(await eventually { stuck.isStalled && pool.threadCount == 2 })
        stuck.gate.signal()
        try #require(await eventually { !stuck.isStalled })
    }

    @Test func waitUntilIdleWaitsForQueuedActionsButNotForStalledTurns() async {
        let pool = DrainPool(size: 1, stallTimeout: nil)
        defer { pool.shutdown() }
        let reactor = GatedReactor()
        reactor.applyActions(on: pool)
        reactor.send(.hold)
        reactor.send(.add(3))
        #expect(await wait(for: reactor.holding))
        // The gate is shut, so the pool cannot go idle: this can only time out.
        #expect(!pool.waitUntilIdle(timeout: .milliseconds(20)))
        reactor.gate.signal()
        #expect(pool.waitUntilIdle(timeout: .seconds(10)))
        #expect(reactor.currentState.total == 3)

        // A stalled turn does not count as work to wait for.
        reactor.send(.hold)
        #expect(await wait(for: reactor.holding))
        pool.checkForStalls()
        pool.checkForStalls()
        #expect(pool.waitUntilIdle(timeout: .seconds(10)))
        reactor.gate.signal()
    }

    @Test func threadsEndAfterShutdown() async throws {
        let pool = DrainPool(size: 3, stallTimeout: .milliseconds(50))
        #expect(pool.threadCount == 3)
        let reactor = GatedReactor()
        reactor.applyActions(on: pool)
        await settled(reactor, reactor.send(.add(1)))
        pool.shutdown()
        try #require(await eventually { pool.threadCount == 0 })
    }
}

/// The package's threads carry names of their own, which `top -H`, `perf` and the benchmarks'
/// CPU split by thread read from `/proc/PID/task/*/comm`.
@Suite struct ThreadNameTests {
    @Test func aThreadStartedWithANameCarriesItCutTo15Bytes() throws {
        #if os(Linux)
            let names = Locked<[String]>([])
            let done = DispatchSemaphore(value: 0)
            for name in ["rs-test", "rs-a-much-longer-name"] {
                var error: Int32 = 0
                let thread = try #require(
                    startThread(
                        named: name,
                        {
                            let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
                            names.withLock { $0.append(comm.trimmingCharacters(in: .newlines)) }
                            done.signal()
                        }, error: &error))
                done.wait()
                pthread_join(thread, nil)
            }
            #expect(names.withLock { $0 } == ["rs-test", "rs-a-much-longe"])
        #endif
    }
}
