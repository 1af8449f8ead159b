import Foundation
import Locking
import ReactorCore
import ReactorExamples
import ReactorTesting
import Synchronization
import Testing

@Suite struct ExampleReactorTests {
    @Test func counterYieldsExactlyFourStatesPerAction() async {
        let clock = TestClock()
        let reactor = CounterReactor(delay: .milliseconds(500), clock: clock)
        let recorder = StateRecorder(reactor)
        let receipt = reactor.send(.increase)
        await clock.waitForSleepers(1)
        #expect(
            recorder.states == [
                CounterReactor.State(),
                CounterReactor.State(value: 0, isLoading: true),
            ])
        clock.advance(by: .milliseconds(500))
        await reactor.settled(receipt)
        #expect(
            recorder.states == [
                CounterReactor.State(),
                CounterReactor.State(value: 0, isLoading: true),
                CounterReactor.State(value: 1, isLoading: true),
                CounterReactor.State(value: 1, isLoading: false),
                CounterReactor.State(value: 1, isLoading: false, alertMessage: Pulse(value: "increased!", valueUpdatedCount: 1)),
            ])
        #expect(recorder.updates.map(\.version) == [0, 1, 2, 3, 4])
    }

    @Test func counterWithZeroDelayAppliesEverythingInline() {
        let reactor = CounterReactor(delay: .zero)
        let recorder = StateRecorder(reactor)
        reactor.send(.decrease)
        reactor.send(.decrease)
        #expect(recorder.states.map(\.isLoading) == [false, true, true, false, false, true, true, false, false])
        #expect(reactor.currentState.value == -2)
        #expect(reactor.currentState.$alertMessage == Pulse(value: "decreased!", valueUpdatedCount: 2))
    }

    @Test func searchLatestQueryWins() async {
        let clock = TestClock()
        let reactor = SearchReactor(latency: .milliseconds(300), clock: clock)
        let recorder = StateRecorder(reactor)
        let first = reactor.send(.updateQuery(query: "swift"))
        await clock.waitForSleepers(1)
        let second = reactor.send(.updateQuery(query: "nio"))
        #expect(clock.sleeperCount == 0)  // the first search was cancelled at once
        await clock.waitForSleepers(1)  // and the second one is waiting
        clock.advance(by: .milliseconds(300))
        await reactor.settled(second)
        await reactor.settled(first)

        let state = reactor.currentState
        #expect(state.query == "nio")
        #expect(!state.results.isEmpty)
        #expect(state.results.allSatisfy { $0.lowercased().contains("nio") })
        let everShown = recorder.states.flatMap(\.results)
        #expect(everShown.allSatisfy { $0.lowercased().contains("nio") })
    }

    @Test func searchLoadsTheNextPage() async {
        let clock = TestClock()
        let reactor = SearchReactor(latency: .milliseconds(300), clock: clock)
        await complete(reactor.send(.updateQuery(query: "s")), of: reactor, on: clock, after: .milliseconds(300))
        #expect(reactor.currentState.results.count == SearchReactor.pageSize)
        #expect(reactor.currentState.nextPage == 2)

        let next = reactor.send(.loadNextPage)
        #expect(reactor.currentState.isLoadingNextPage)
        reactor.send(.loadNextPage)  // ignored while a page is loading
        await complete(next, of: reactor, on: clock, after: .milliseconds(300))
        #expect(reactor.currentState.results.count == 2 * SearchReactor.pageSize)
        #expect(reactor.currentState.nextPage == 3)
        #expect(!reactor.currentState.isLoadingNextPage)
        #expect(clock.sleeperCount == 0)
    }

    /// Lets the action's delay pass on the clock and returns once it has settled.
    private func complete<R: Reactor>(_ receipt: ActionReceipt, of reactor: R, on clock: TestClock, after delay: Duration) async {
        await clock.waitForSleepers(1)
        clock.advance(by: delay)
        await reactor.settled(receipt)
    }

    @Test func todoAddsTogglesEditsMovesAndDeletes() {
        let ids = Locked(0)
        let reactor = TodoReactor {
            ids.withLock {
                $0 += 1
                return "t\($0)"
            }
        }
        reactor.send(.add(title: "one"))
        reactor.send(.add(title: "two"))
        reactor.send(.toggle(id: "t1"))
        reactor.send(.edit(id: "t2", title: "TWO"))
        reactor.send(.move(from: 1, to: 0))
        #expect(
            reactor.currentState.tasks == [
                TodoTask(id: "t2", title: "TWO"),
                TodoTask(id: "t1", title: "one", isDone: true),
            ])
        reactor.send(.delete(id: "t1"))
        #expect(reactor.currentState.tasks.map(\.id) == ["t2"])
    }

    @Test func todoUnknownIDReportsAnErrorAndChangesNothing() {
        let reactor = TodoReactor()
        reactor.send(.add(title: "one"))
        let before = reactor.currentUpdate
        let failures = Locked<[MutationFailure]>([])
        let token = reactor.observeErrors { failure in failures.withLock { $0.append(failure) } }
        let receipt = reactor.send(.toggle(id: "missing"))
        reactor.send(.move(from: 0, to: 5))
        #expect(reactor.currentUpdate.version == before.version)
        #expect(reactor.currentState == before.state)
        let reported = failures.withLock { $0 }
        #expect(reported.count == 2)
        #expect(reported.first?.actionSequence == receipt.sequence)
        #expect(reported.first?.message == "no task has the id missing")
        token.cancel()
    }

    @Test func roomMessageReachesAnotherInstanceAndMembersLeaveOnDispose() async {
        let room = Room()
        let alice = RoomReactor(room: room)
        let bob = RoomReactor(room: room)
        let bobStates = StateRecorder(bob)
        let aliceStates = StateRecorder(alice)
        await alice.settled(alice.send(.setName(name: "alice")))
        alice.send(.say(text: "hi bob"))
        let delivered = await bobStates.wait { states in
            states.last?.messages.map(\.text) == ["hi bob"] && states.last?.messages.first?.author == "alice"
        }
        #expect(delivered)
        #expect(await aliceStates.wait { $0.last?.members.count == 2 })

        bob.dispose()
        #expect(room.members.map(\.id) == [alice.memberID])
        #expect(await aliceStates.wait { $0.last?.members.map(\.name) == ["alice"] })
    }

    @Test func exampleActionsRoundTripThroughJSON() throws {
        try expectRoundTrip(CounterReactor.exampleActions)
        try expectRoundTrip(TodoReactor.exampleActions)
        try expectRoundTrip(SearchReactor.exampleActions)
        try expectRoundTrip(RoomReactor.exampleActions)
        let bare = try JSONDecoder().decode(CounterReactor.Action.self, from: Data(#""increase""#.utf8))
        #expect(bare == .increase)
    }

    @Test func statesEncodeWithStableKeys() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = String(decoding: try encoder.encode(CounterReactor().initialState), as: UTF8.self)
        #expect(json == #"{"alertMessage":{"count":0,"value":null},"isLoading":false,"value":0}"#)
        let search = String(decoding: try encoder.encode(SearchReactor().initialState), as: UTF8.self)
        #expect(search == #"{"isLoadingNextPage":false,"nextPage":null,"query":"","results":[]}"#)
    }

    private func expectRoundTrip<Action: Codable & Equatable>(_ actions: [Action]) throws {
        let data = try JSONEncoder().encode(actions)
        #expect(try JSONDecoder().decode([Action].self, from: data) == actions)
    }
}
