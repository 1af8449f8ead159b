import MyReactors
import ReactorTesting
import Testing

@Suite struct CounterReactorTests {
    @Test func increaseShowsLoadingThenAddsTheStep() async {
        let store = TestStore(CounterReactor(step: 5))
        await store.send(.increase) { $0.isLoading = true }
        await store.receive { $0.value = 5 }
        await store.receive { $0.isLoading = false }
        await store.finish()
    }

    @Test func decreaseTakesTheStepAway() async {
        let store = TestStore(CounterReactor(step: 2))
        await store.send(.decrease) { $0.isLoading = true }
        await store.receive { $0.value = -2 }
        await store.receive { $0.isLoading = false }
        await store.finish()
    }
}
