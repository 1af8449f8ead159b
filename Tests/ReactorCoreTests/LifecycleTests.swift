import Foundation
import Locking
import ReactorCore
import ReactorExamples
import ReactorTesting
import Synchronization
import TestSupport
import Testing

@Suite struct LifecycleTests {
    @Test func pulseCountsEveryAssignmentEvenOfAnEqualValue() throws {
        @Pulse var message: String? = nil
        #expect($message.valueUpdatedCount == 0)
        message = "hi"
        message = "hi"
        message = "hi"
        #expect($message.valueUpdatedCount == 3)
        #expect(message == "hi")

        let once = Pulse<String?>(value: "hi", valueUpdatedCount: 1)
        #expect($message != once)  // equal values, different counts

        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = try #require(String(data: encoder.encode($message), encoding: .utf8))
        #expect(json == #"{"count":3,"value":"hi"}"#)
        let decoded = try JSONDecoder().decode(Pulse<String?>.self, from: Data(json.utf8))
        #expect(decoded == $message)
        let empty = try String(data: encoder.encode(Pulse<String?>(wrappedValue: nil)), encoding: .utf8)
        #expect(empty == #"{"count":0,"value":null}"#)
    }

    @Test func pulseCountWraps() {
        var pulse = Pulse(value: 1, valueUpdatedCount: .max)
        pulse.wrappedValue = 1
        #expect(pulse.valueUpdatedCount == 0)
    }

    @Test func disposeFreesTheReactorAndCancelsItsWork() async {
        let clock = TestClock()
        weak var weakReactor: ProbeReactor?
        let settled = Atomic<Bool>(false)
        let stream: StateStream<ProbeReactor.State>
        do {
            let reactor = ProbeReactor(clock: clock)
            weakReactor = reactor
            stream = reactor.state
            reactor.whenSettled(reactor.send(.wait)) { settled.store(true, ordering: .relaxed) }
            await clock.waitForSleepers(1)
            reactor.dispose()
            #expect(reactor.isDisposed)
            let afterDispose = reactor.send(.add(1))
            #expect(afterDispose.sequence == 2)
            #expect(reactor.currentState.total == 0)
        }
        #expect(weakReactor == nil)
        #expect(clock.sleeperCount == 0)  // the delayed mutation's task was cancelled
        #expect(settled.load(ordering: .relaxed) == true)
        var iterator = stream.makeAsyncIterator()
        #expect(await iterator.next() == nil)
    }

    @Test func releasingTheReactorCancelsItsWorkAndFinishesStreams() async {
        let clock = TestClock()
        weak var weakReactor: ProbeReactor?
        var iterator: StateStream<ProbeReactor.State>.Iterator
        do {
            let reactor = ProbeReactor(clock: clock)
            weakReactor = reactor
            iterator = reactor.state.makeAsyncIterator()
            reactor.send(.wait)
            await clock.waitForSleepers(1)
        }
        #expect(weakReactor == nil)
        #expect(clock.sleeperCount == 0)
        #expect(await iterator.next()?.total == 0)  // the buffered initial state
        #expect(await iterator.next() == nil)
    }

    @Test func settleObserverHearsEachActionOnceWhenItSettles() async {
        let clock = TestClock()
        let reactor = ProbeReactor(clock: clock)
        let heard = Locked<[UInt64]>([])
        reactor.observeSettlementsUntilDisposed { sequence in heard.withLock { $0.append(sequence) } }
        reactor.send(.add(1))
        let waiting = reactor.send(.wait)
        await clock.waitForSleepers(1)
        reactor.send(.add(2))
        #expect(heard.withLock { $0 } == [1, 3])  // the waiting action has not settled
        clock.advance(by: .seconds(60))
        await reactor.settled(waiting)
        #expect(heard.withLock { $0 } == [1, 3, 2])
        #expect(reactor.currentState.total == 4)

        // Stubbed actions settle as they are recorded.
        reactor.isStubEnabled = true
        reactor.send(.add(5))
        #expect(heard.withLock { $0 } == [1, 3, 2, 4])
        reactor.isStubEnabled = false

        // Disposing cuts an action off: it never settles.
        reactor.send(.wait)
        await clock.waitForSleepers(1)
        reactor.dispose()
        reactor.send(.add(1))
        #expect(heard.withLock { $0 } == [1, 3, 2, 4])
    }

    @Test func whenSettledWaitsForAsynchronousMutations() async {
        let clock = TestClock()
        let reactor = CounterReactor(delay: .milliseconds(500), clock: clock)
        let settled = Atomic<Bool>(false)
        let receipt = reactor.send(.increase)
        reactor.whenSettled(receipt) { settled.store(true, ordering: .relaxed) }
        await clock.waitForSleepers(1)
        let settledEarly = settled.load(ordering: .relaxed)
        #expect(!settledEarly)
        #expect(reactor.currentState.isLoading)
        clock.advance(by: .milliseconds(500))
        await reactor.settled(receipt)
        let settledLate = settled.load(ordering: .relaxed)
        #expect(settledLate)
        #expect(reactor.currentState.value == 1)
        #expect(!reactor.currentState.isLoading)
    }

    @Test func whenSettledIsSynchronousForImmediateMutations() {
        let reactor = CounterReactor(delay: .zero)
        let settled = Atomic<Bool>(false)
        reactor.whenSettled(reactor.send(.increase)) { settled.store(true, ordering: .relaxed) }
        let isSettled = settled.load(ordering: .relaxed)
        #expect(isSettled)
        #expect(reactor.currentState.value == 1)
    }

    @Test func observerAddedWhileApplyingGetsTheStateReachedThenEveryLaterOne() {
        let reactor = ProbeReactor()
        let seen = Locked<[UInt64]>([])
        let inner = Locked<ObservationToken?>(nil)
        let outer = reactor.observe { update in
            guard update.version == 1 else { return }
            // Registered while the reactor is applying an action: delivered by the drainer.
            let token = reactor.observe { update in seen.withLock { $0.append(update.version) } }
            inner.withLock { $0 = token }
            reactor.send(.add(1))
        }
        reactor.send(.add(1))
        #expect(seen.withLock { $0 } == [1, 2])
        outer.cancel()
    }

    @Test func observeStatesSeesWhatObserveSeesAsTwoArguments() {
        let reactor = ProbeReactor()
        let updates = Locked<[(UInt64, Int)]>([])
        let pairs = Locked<[(UInt64, Int)]>([])
        let updatesToken = reactor.observe { update in updates.withLock { $0.append((update.version, update.state.total)) } }
        let pairsToken = reactor.observeStates { state, version in pairs.withLock { $0.append((version, state.total)) } }
        reactor.send(.add(2))
        reactor.send(.add(3))
        let seenAsUpdates = updates.withLock { $0 }
        let seenAsPairs = pairs.withLock { $0 }
        #expect(seenAsPairs.map(\.0) == [0, 1, 2])
        #expect(seenAsPairs.map(\.1) == [0, 2, 5])
        #expect(seenAsPairs.map(\.0) == seenAsUpdates.map(\.0))
        #expect(seenAsPairs.map(\.1) == seenAsUpdates.map(\.1))
        updatesToken.cancel()
        pairsToken.cancel()
    }

    @Test func cancellingAnObservationLetsGoOfItsObserverAtOnce() {
        final class Canary: Sendable {}
        let reactor = ProbeReactor()
        weak var weakCanary: Canary?
        let token: ObservationToken
        do {
            let canary = Canary()
            weakCanary = canary
            token = reactor.observe { _ in _ = canary }
        }
        reactor.send(.add(1))  // applied on this thread, which delivers the state to the observer
        #expect(weakCanary != nil)
        token.cancel()
        #expect(weakCanary == nil)
    }

    @Test func observersRegisteredUntilDisposedStayWithoutATokenAndGoOnDispose() {
        final class Canary: Sendable {}
        let reactor = ProbeReactor()
        weak var weakCanary: Canary?
        let versions = Locked<[UInt64]>([])
        let failures = Locked<[String]>([])
        do {
            let canary = Canary()
            weakCanary = canary
            // Nothing is kept from these calls: the observers must stay registered anyway.
            reactor.observeStatesUntilDisposed { _, version in
                _ = canary
                versions.withLock { $0.append(version) }
            }
            reactor.observeErrorsUntilDisposed { failure in
                _ = canary
                failures.withLock { $0.append(failure.message) }
            }
        }
        reactor.send(.add(1))
        reactor.send(.fail)  // publishes one state, then fails
        #expect(versions.withLock { $0 } == [0, 1, 2])
        #expect(failures.withLock { $0 } == ["boom"])
        #expect(weakCanary != nil)

        reactor.dispose()
        #expect(weakCanary == nil)
        reactor.send(.add(1))
        #expect(versions.withLock { $0 } == [0, 1, 2])
    }

    @Test func registeringAnErrorObserverOnADisposedReactorKeepsNothing() {
        final class Canary: Sendable {}
        let reactor = ProbeReactor()
        reactor.dispose()
        weak var weakCanary: Canary?
        do {
            let canary = Canary()
            weakCanary = canary
            reactor.observeErrorsUntilDisposed { _ in _ = canary }
            reactor.observeStatesUntilDisposed { _, _ in _ = canary }
        }
        #expect(weakCanary == nil)
    }

    // When an observer that owns another observation of its reactor is let go, the token it
    // owns cancels itself, which takes the reactor's lock: observers must never be let go while
    // that lock is held. Each test runs on another thread, so a deadlock fails it after a while
    // rather than holding up the run.

    @Test func anObserverMayOwnAnotherObservationOfItsReactor() async {
        let reactor = ProbeReactor()
        let outer = observeOwningAnotherObservation(reactor)
        #expect(
            await finishes {
                reactor.send(.add(1))
                outer.cancel()
                reactor.send(.add(1))
            }, "the reactor deadlocked letting go of an observer")
    }

    @Test func disposingAReactorWhoseObserverOwnsAnotherObservationOfIt() async {
        let reactor = ProbeReactor()
        let outer = observeOwningAnotherObservation(reactor)
        #expect(
            await finishes {
                reactor.dispose()
                outer.cancel()
            }, "the reactor deadlocked letting go of its observers")
    }

    /// Observes `reactor` with an observer whose closure owns a second observation of it.
    private func observeOwningAnotherObservation(_ reactor: ProbeReactor) -> ObservationToken {
        let inner = Locked<ObservationToken?>(reactor.observe { _ in })
        return reactor.observe { _ in _ = inner }
    }

    @Test func cancelByIDStopsInFlightWork() async {
        let clock = TestClock()
        let reactor = SearchReactor(latency: .milliseconds(300), clock: clock)
        let receipt = reactor.send(.updateQuery(query: "swift"))
        await clock.waitForSleepers(1)
        reactor.send(.updateQuery(query: ""))  // empty query: immediate, still cancels
        #expect(clock.sleeperCount == 0)
        await reactor.settled(receipt)
        #expect(reactor.currentState.results.isEmpty)
    }
}

/// Counts how often its runtime builds the pipeline, and holds the first build until released,
/// so that other threads arrive while the runtime is starting.
private final class SlowStartReactor: Reactor {
    enum Action: String, Codable, Sendable { case add }
    typealias Mutation = Action
    struct State: Codable, Sendable, Equatable { var total = 0 }

    let initialState = State()
    let runtime = ReactorRuntime<SlowStartReactor>()
    let builds = Atomic<Int>(0)
    let building = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)

    func transform(action: Flow<Action>) -> Flow<Action> {
        if builds.wrappingAdd(1, ordering: .relaxed).oldValue == 0 {
            building.signal()
            release.wait()
        }
        return action
    }

    func reduce(state: State, mutation: Mutation) -> State {
        State(total: state.total + 1)
    }
}

@Suite struct StartTests {
    @Test func threadsArrivingWhileTheRuntimeStartsWaitForItAndItStartsOnce() {
        let reactor = SlowStartReactor()
        let others = 8
        let sent = DispatchGroup()
        let arrived = DispatchSemaphore(value: 0)
        sent.enter()
        Thread.detachNewThread {
            _ = reactor.send(.add)
            sent.leave()
        }
        reactor.building.wait()  // the first thread is inside the start now
        for _ in 0..<others {
            sent.enter()
            Thread.detachNewThread {
                arrived.signal()
                _ = reactor.send(.add)
                sent.leave()
            }
        }
        for _ in 0..<others { arrived.wait() }
        reactor.release.signal()
        sent.wait()
        #expect(reactor.builds.load(ordering: .relaxed) == 1)
        #expect(reactor.currentState.total == others + 1)
    }
}
