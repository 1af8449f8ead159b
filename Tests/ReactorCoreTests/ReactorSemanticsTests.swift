import Locking
import ReactorCore
import ReactorTesting
import Synchronization
import Testing

@Suite struct ReactorSemanticsTests {
    @Test func hooksRunInReactorKitOrder() {
        let reactor = HookReactor()
        reactor.send(.tap)
        #expect(
            reactor.log.all == [
                "transform(action:)", "transform(mutation:)", "transform(state:)",
                "state",  // the initial state goes through transform(state:) too
                "action", "mutate", "mutation", "reduce", "state",
            ])
        reactor.log.clear()
        reactor.send(.tap)
        #expect(reactor.log.all == ["action", "mutate", "mutation", "reduce", "state"])
    }

    @Test func initialStateIsEmittedFirst() async {
        let reactor = ProbeReactor()
        let recorder = StateRecorder(reactor)
        #expect(recorder.updates.map(\.version) == [0])
        #expect(recorder.states == [ProbeReactor.State()])

        var iterator = reactor.state.makeAsyncIterator()
        let first = await iterator.next()
        #expect(first == ProbeReactor.State())
    }

    @Test func lateSubscriberGetsOnlyTheLatestState() async {
        let reactor = ProbeReactor()
        for amount in 1...3 { reactor.send(.add(amount)) }
        let recorder = StateRecorder(reactor)
        #expect(recorder.states.map(\.total) == [6])
        #expect(recorder.updates.map(\.version) == [3])

        var iterator = reactor.state.makeAsyncIterator()
        #expect(await iterator.next()?.total == 6)
        reactor.send(.add(4))
        #expect(await iterator.next()?.total == 10)
    }

    @Test func currentStateFollowsEveryReduce() {
        let reactor = ProbeReactor()
        #expect(reactor.currentState.total == 0)
        for amount in 1...5 {
            reactor.send(.add(amount))
            #expect(reactor.currentState.total == (1...amount).reduce(0, +))
            #expect(reactor.currentUpdate.version == UInt64(amount))
        }
    }

    @Test func anErrorEndsOnlyItsOwnAction() async {
        let reactor = ProbeReactor()
        let failures = Locked<[MutationFailure]>([])
        let token = reactor.observeErrors { failure in failures.withLock { $0.append(failure) } }
        let failed = reactor.send(.fail)
        reactor.send(.add(10))
        #expect(reactor.currentState.total == 11)  // 1 before the error, not the 100 after it
        #expect(failures.withLock { $0.map(\.actionSequence) } == [failed.sequence])
        #expect(failures.withLock { $0.first?.message } == "boom")
        #expect(failures.withLock { $0.first?.errorType.hasSuffix("TestError") } == true)

        let late = reactor.send(.failLater)
        await reactor.clock.waitForSleepers(1)
        reactor.clock.advance(by: .seconds(1))
        await reactor.settled(late)
        reactor.send(.add(5))
        #expect(reactor.currentState.total == 17)
        #expect(failures.withLock { $0.map(\.message) } == ["boom", "late boom"])
        token.cancel()
    }

    @Test func errorsStreamDeliversFailures() async {
        let reactor = ProbeReactor()
        var errors = reactor.errors.makeAsyncIterator()
        reactor.send(.fail)
        #expect(await errors.next()?.message == "boom")
        reactor.dispose()
        #expect(await errors.next() == nil)
    }

    @Test func stubRecordsActionsAndDoesNotMutate() {
        let reactor = ProbeReactor()
        let recorder = StateRecorder(reactor)
        reactor.isStubEnabled = true
        reactor.send(.add(1))
        reactor.action.send(.add(2))
        #expect(reactor.stub.actions == [.add(1), .add(2)])
        let reduceCount = reactor.reduceCount.load(ordering: .relaxed)
        #expect(reduceCount == 0)
        #expect(reactor.currentState.total == 0)

        var stubbed = ProbeReactor.State()
        stubbed.total = 42
        reactor.stub.state = stubbed
        #expect(reactor.currentState.total == 42)
        #expect(recorder.states.map(\.total) == [0, 42])
    }

    @Test func stubbedActionsSettleAtOnce() {
        let reactor = ProbeReactor()
        reactor.isStubEnabled = true
        let settled = Atomic<Bool>(false)
        reactor.whenSettled(reactor.send(.wait)) { settled.store(true, ordering: .relaxed) }
        let isSettled = settled.load(ordering: .relaxed)
        #expect(isSettled)
    }

    @Test func transformedStateIsSeenBySubscribersButNotByReduce() {
        let reactor = ScalingReactor()
        let recorder = StateRecorder(reactor)
        reactor.send(.increment)
        reactor.send(.increment)
        #expect(reactor.seenByReduce.all == ["0", "1"])
        #expect(reactor.currentState.value == 20)
        #expect(recorder.states.map(\.value) == [0, 10, 20])
    }

    @Test func globalStateMergedInTransformMutationReachesState() async {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let reactor = MergingReactor(global: stream)
        let recorder = StateRecorder(reactor)
        reactor.send(1)
        continuation.yield(100)
        #expect(await recorder.wait { $0.last == 101 })
        continuation.yield(1000)
        #expect(await recorder.wait { $0.last == 1101 })
    }

    @Test func concurrentSendsAreReducedExactlyOnceInSerialOrder() async {
        let reactor = ProbeReactor()
        let versions = Locked<[UInt64]>([])
        let token = reactor.observe { update in versions.withLock { $0.append(update.version) } }
        let senders = 8
        let perSender = 1_250
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<senders {
                group.addTask {
                    for index in 0..<perSender { reactor.send(.send(sender: sender, index: index)) }
                }
            }
        }
        // Every drainer is inside some send call, so once all sends returned the queue is empty.
        let state = reactor.currentState
        #expect(state.total == senders * perSender)
        #expect(state.outOfOrder == 0)
        #expect(state.lastIndexBySender.values.allSatisfy { $0 == perSender - 1 })
        let (reduceCount, overlaps) = (reactor.reduceCount.load(ordering: .relaxed), reactor.overlaps.load(ordering: .relaxed))
        #expect(reduceCount == senders * perSender)
        #expect(overlaps == 0)
        let seen = versions.withLock { $0 }
        #expect(seen == Array(0...UInt64(senders * perSender)))
        token.cancel()
    }
}

/// Multiplies the state by ten on the way out.
final class ScalingReactor: Reactor {
    enum Action: String, Codable, Sendable { case increment }
    typealias Mutation = Action
    struct State: Codable, Sendable { var value = 0 }

    let initialState = State()
    let runtime = ReactorRuntime<ScalingReactor>()
    let seenByReduce = EventLog()

    func reduce(state: State, mutation: Mutation) -> State {
        seenByReduce.append(String(state.value))
        return State(value: state.value + 1)
    }

    func transform(state: Flow<State>) -> Flow<State> {
        state.map { State(value: $0.value * 10) }
    }
}

/// Adds its own actions and a global stream's values.
final class MergingReactor: Reactor {
    typealias Action = Int
    typealias State = Int

    let initialState = 0
    let runtime = ReactorRuntime<MergingReactor>()
    let global: AsyncStream<Int>

    init(global: AsyncStream<Int>) { self.global = global }

    func transform(mutation: Flow<Int>) -> Flow<Int> { mutation.merge(with: global) }
    func reduce(state: Int, mutation: Int) -> Int { state + mutation }
}

@Suite struct ConcurrencyStressTests {
    /// Actions from many tasks, each with an immediate mutation and one sent from a task, plus
    /// settle callbacks that send again: everything is reduced once, serially, in version order.
    @Test func immediateAndTaskMutationsFromManySendersAreReducedOnceEach() async {
        let reactor = StressReactor()
        let versions = Locked<[UInt64]>([])
        let token = reactor.observe { update in versions.withLock { $0.append(update.version) } }
        let followUps = EventLog()
        let receipts = await withTaskGroup(of: [ActionReceipt].self) { group in
            for _ in 0..<4 {
                group.addTask {
                    (0..<250).map { _ in
                        let receipt = reactor.send(.twice)
                        reactor.whenSettled(receipt) {
                            followUps.append("settled")
                            reactor.send(.once)
                        }
                        return receipt
                    }
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        for receipt in receipts { await reactor.settled(receipt) }
        #expect(followUps.all.count == 1_000)
        // Each `.twice` adds 2 (one inline, one from a task), each follow-up `.once` adds 1.
        let recorder = StateRecorder(reactor)
        #expect(await recorder.wait { $0.last == 3_000 })
        let overlaps = reactor.overlaps.load(ordering: .relaxed)
        #expect(overlaps == 0)
        let seen = versions.withLock { $0 }
        #expect(seen == Array(0...UInt64(seen.count - 1)))
        #expect(seen.count == 3_001)
        token.cancel()
    }
}

final class StressReactor: Reactor {
    enum Action: String, Codable, Sendable { case once, twice }
    typealias Mutation = Int
    typealias State = Int

    let initialState = 0
    let runtime = ReactorRuntime<StressReactor>()
    let reducing = Atomic<Int>(0)
    let overlaps = Atomic<Int>(0)

    func mutate(action: Action) -> Mutations<Int> {
        switch action {
        case .once: .just(1)
        case .twice: .concat(.just(1), .run { send in send(1) })
        }
    }

    func reduce(state: Int, mutation: Int) -> Int {
        if reducing.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue != 1 {
            overlaps.wrappingAdd(1, ordering: .relaxed)
        }
        defer { reducing.wrappingSubtract(1, ordering: .acquiringAndReleasing) }
        return state + mutation
    }
}
