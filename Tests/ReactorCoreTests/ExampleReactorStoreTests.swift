import Locking
import ReactorCore
import ReactorExamples
import ReactorTesting
import Testing

/// The example reactors, every state asserted with the TestStore.
@Suite struct ExampleReactorStoreTests {
    @Test func counterDecreasesTwice() async {
        let store = TestStore(CounterReactor(delay: .zero))
        for value in [-1, -2] {
            await store.send(.decrease) { $0.isLoading = true }
            await store.receive { $0.value = value }
            await store.receive { $0.isLoading = false }
            await store.receive { $0.alertMessage = "decreased!" }
        }
        await store.finish()
    }

    @Test(arguments: [(1, 1), (2, 0), (3, 0)])
    func counterRecoveryChangesTheValueOnlyWhenTheCrashCameBeforeIt(reduced: Int, change: Int) async {
        // A crash cut the increase off after `reduced` of its mutations: loading (1), the value (2),
        // the end of loading (3).
        let restored = CounterReactor.State(value: reduced >= 2 ? 1 : 0, isLoading: reduced < 3)
        let store = TestStore(
            CounterReactor(delay: .zero), restoring: restored,
            interrupted: [InterruptedAction(action: .increase, sequence: 4, reducedMutations: reduced)])
        if change == 1 { await store.receive { $0.value = 1 } }
        await store.receive { $0.isLoading = false }  // published even when it was over already
        // Never left loading, and the next action is numbered after the interrupted one.
        await store.send(.increase) { $0.isLoading = true }
        await store.receive { $0.value = 2 }
        await store.receive { $0.isLoading = false }
        await store.receive { $0.alertMessage = "increased!" }
        #expect(store.reactor.send(.decrease).sequence == 6)
        await store.receive { $0.isLoading = true }
        await store.receive { $0.value = 1 }
        await store.receive { $0.isLoading = false }
        await store.receive { $0.alertMessage = "decreased!" }
        await store.finish()
    }

    @Test func searchRecoveryLoadsThePageACrashCutOff() async {
        var restored = SearchReactor.State()
        restored.query = "swift"
        restored.results = ["swift-log"]
        restored.nextPage = 2
        restored.isLoadingNextPage = true
        let names = (1...30).map { "swift-\($0)" }
        let store = TestStore(
            SearchReactor(names: names, latency: .zero), restoring: restored,
            interrupted: [InterruptedAction(action: .loadNextPage, sequence: 2, reducedMutations: 1)])
        await store.receive {
            $0.results += Array(names[20...])
            $0.nextPage = nil
        }
        await store.receive { $0.isLoadingNextPage = false }
        await store.finish()
    }

    @Test func todoAddsTogglesRenamesMovesAndDeletes() async {
        let ids = Locked(["a", "b"])
        let store = TestStore(TodoReactor(makeID: { ids.withLock { $0.removeFirst() } }))
        await store.send(.add(title: "milk")) { $0.tasks = [TodoTask(id: "a", title: "milk")] }
        await store.send(.add(title: "eggs")) { $0.tasks.append(TodoTask(id: "b", title: "eggs")) }
        await store.send(.toggle(id: "a")) { $0.tasks[0].isDone = true }
        await store.send(.edit(id: "b", title: "bread")) { $0.tasks[1].title = "bread" }
        await store.send(.move(from: 1, to: 0)) { $0.tasks.swapAt(0, 1) }
        await store.send(.delete(id: "a")) { $0.tasks.removeLast() }
        await store.send(.toggle(id: "zzz"))
        await store.receiveError(action: 7, containing: "zzz")
        await store.finish()
    }

    @Test func searchShowsOnlyTheLatestQuerysResults() async {
        let clock = TestClock()
        let store = TestStore(
            SearchReactor(names: ["swift-nio", "swift-log", "vapor"], latency: .milliseconds(300), clock: clock),
            clock: clock)
        await store.send(.updateQuery(query: "swift")) { $0.query = "swift" }
        await store.send(.updateQuery(query: "nio")) { $0.query = "nio" }  // cancels the first search
        await store.advance(by: .milliseconds(300)) { $0.results = ["swift-nio"] }
        await store.finish()
    }
}
