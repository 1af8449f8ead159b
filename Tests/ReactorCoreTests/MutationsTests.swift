import Dispatch
import Locking
import ReactorCore
import ReactorTesting
import Synchronization
import TestSupport
import Testing

/// A reactor whose actions are `Mutations` descriptions, to test how each form is applied.
final class ScriptReactor: Reactor {
    typealias Action = String
    typealias Mutation = String
    typealias State = [String]

    let initialState: [String] = []
    let runtime = ReactorRuntime<ScriptReactor>()
    let clock = TestClock()
    let script: @Sendable (String, TestClock) -> Mutations<String>

    init(script: @escaping @Sendable (String, TestClock) -> Mutations<String>) { self.script = script }

    func mutate(action: String) -> Mutations<String> { script(action, clock) }
    func reduce(state: [String], mutation: String) -> [String] { state + [mutation] }
}

@Suite struct MutationsTests {
    @Test func concatWaitsForAWaitingMergeBeforeItsNextPart() async {
        let reactor = ScriptReactor { _, clock in
            .concat(
                .merge(.just("a"), Mutations.just("late").delayed(by: .seconds(1), clock: clock), .just("b")),
                .just("after")
            )
        }
        let receipt = reactor.send("go")
        #expect(reactor.currentState == ["a", "b"])
        await reactor.clock.waitForSleepers(1)
        reactor.clock.advance(by: .seconds(1))
        await reactor.settled(receipt)
        #expect(reactor.currentState == ["a", "b", "late", "after"])
    }

    @Test func mutationsFromAnAsyncSequenceArriveInOrder() async {
        let reactor = ScriptReactor { _, _ in
            Mutations(
                AsyncStream { continuation in
                    for item in ["x", "y", "z"] { continuation.yield(item) }
                    continuation.finish()
                })
        }
        await reactor.settled(reactor.send("go"))
        #expect(reactor.currentState == ["x", "y", "z"])
    }

    @Test func cancelByIDDropsTheWaitingPartAndSettlesItsAction() async {
        let reactor = ScriptReactor { action, clock in
            switch action {
            case "start": Mutations.just("never").delayed(by: .seconds(1), clock: clock).cancellable(id: 7)
            default: .concat(.cancel(id: 7), .just("stopped"))
            }
        }
        let started = reactor.send("start")
        await reactor.clock.waitForSleepers(1)
        reactor.send("stop")
        await reactor.settled(started)
        reactor.clock.advance(by: .seconds(2))
        #expect(reactor.currentState == ["stopped"])
        #expect(reactor.clock.sleeperCount == 0)
    }

    @Test func anActionCancelledInFlightSettlesWhileItsWorkStillRuns() async {
        // The slow action's work ignores cancellation: it waits at the gate, then sends anyway.
        let gate = Gate()
        let (entered, enter) = AsyncStream.makeStream(of: Void.self)
        let (ended, end) = AsyncStream.makeStream(of: Void.self)
        let reactor = ScriptReactor { action, _ in
            switch action {
            case "slow":
                Mutations.run { send in
                    enter.yield()
                    await gate.wait()
                    send("late")
                    end.yield()
                }.cancellable(id: "load", cancelInFlight: true)
            case "fast": Mutations.just("fast").cancellable(id: "load", cancelInFlight: true)
            default: .just(action)
            }
        }
        let slow = reactor.send("slow")
        for await _ in entered { break }
        reactor.send("fast")
        // Cancelled by "fast": settled now, though its work is still held at the gate.
        let settled = DispatchSemaphore(value: 0)
        reactor.whenSettled(slow) { settled.signal() }
        // A failure guard only: under ThreadSanitizer, with every suite at once on two cores, the
        // runtime's tasks have waited longer than the default 10 s for a thread.
        #expect(await wait(for: settled, seconds: 60))
        gate.open()
        for await _ in ended { break }
        // Applied after anything the late work queued, so the state below includes it if it counted.
        await reactor.settled(reactor.send("after"))
        #expect(reactor.currentState == ["fast", "after"])
    }

    @Test func runSendsMutationsFromATask() async {
        let reactor = ScriptReactor { _, clock in
            .run { send in
                send("first")
                try await clock.sleep(for: .milliseconds(10))
                send.send("second")
            }
        }
        let receipt = reactor.send("go")
        await reactor.clock.waitForSleepers(1)
        #expect(reactor.currentState == ["first"])
        reactor.clock.advance(by: .milliseconds(10))
        await reactor.settled(receipt)
        #expect(reactor.currentState == ["first", "second"])
    }

    @Test func mutationsOfDifferentActionsInterleave() async {
        let reactor = ScriptReactor { action, clock in
            .concat(.just("\(action) start"), Mutations.just("\(action) end").delayed(by: .seconds(1), clock: clock))
        }
        let first = reactor.send("one")
        let second = reactor.send("two")
        await reactor.clock.waitForSleepers(2)
        #expect(reactor.currentState == ["one start", "two start"])
        reactor.clock.advance(by: .seconds(1))
        await reactor.settled(first)
        await reactor.settled(second)
        #expect(Set(reactor.currentState.suffix(2)) == ["one end", "two end"])
    }
}

/// Where work waits until the test opens it. Waiting ignores cancellation, as work that never
/// checks `Task.isCancelled` does.
private final class Gate: Sendable {
    private let state = Locked<(isOpen: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { continuation in
            let isOpen = state.withLock { state -> Bool in
                if !state.isOpen { state.waiters.append(continuation) }
                return state.isOpen
            }
            if isOpen { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.isOpen = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
