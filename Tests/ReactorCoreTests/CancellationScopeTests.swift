import ReactorCore
import ReactorTesting
import Testing

/// `cancellable(id:)` cancels exactly the mutations it is applied to, as `take(until:)` does in
/// ReactorKit, and the stub silences what the transforms merge in.
@Suite struct CancellationScopeTests {
    @Test func cancellingTheMiddleOfAConcatLetsTheConcatGoOn() async {
        let clock = TestClock()
        let reactor = LoaderReactor(clock: clock)
        let recorder = StateRecorder(reactor)
        let load = reactor.send(.load)
        await clock.waitForSleepers(1)
        reactor.send(.cancel)
        await reactor.settled(load)
        #expect(recorder.states.map(\.isLoading) == [false, true, false])
        #expect(reactor.currentState.items == 0)
        #expect(clock.sleeperCount == 0)
    }

    @Test func cancellingOnePartOfAMergeLeavesTheOthersRunning() async {
        let clock = TestClock()
        let reactor = LoaderReactor(clock: clock)
        let both = reactor.send(.loadWithNoise)
        await clock.waitForSleepers(2)
        reactor.send(.cancel)
        clock.advance(by: .milliseconds(200))
        await reactor.settled(both)
        #expect(reactor.currentState.items == 0)
        #expect(reactor.currentState.noise == 1)
    }

    @Test func aNewCancelInFlightLoadEndsOnlyThePreviousLoad() async {
        let clock = TestClock()
        let reactor = LoaderReactor(clock: clock)
        let first = reactor.send(.latestLoad)
        await clock.waitForSleepers(1)
        let second = reactor.send(.latestLoad)
        await reactor.settled(first)
        await clock.waitForSleepers(1)
        clock.advance(by: .milliseconds(100))
        await reactor.settled(second)
        #expect(reactor.currentState.items == 1)
        #expect(!reactor.currentState.isLoading)
    }

    @Test func theStubSilencesStreamsMergedByTheTransforms() async {
        let (asked, signal) = AsyncStream.makeStream(of: Void.self)
        let reactor = LoaderReactor(clock: TestClock(), global: OneThenSignal(value: .addNoise(100), asked: signal))
        reactor.isStubEnabled = true
        // Starts the reactor, and with it the merged stream, whose one mutation then arrives.
        reactor.stub.state = LoaderReactor.State(isLoading: false, items: 7, noise: 0)
        // The stream is asked for a second element only once the first has been handed over.
        for await _ in asked { break }
        #expect(reactor.currentState == LoaderReactor.State(isLoading: false, items: 7, noise: 0))
    }
}

/// Loads after a delay; `cancel` cuts the load off.
private final class LoaderReactor: Reactor {
    enum Action: String, Codable, Sendable { case load, loadWithNoise, latestLoad, cancel }
    enum Mutation: Sendable {
        case setLoading(Bool)
        case setItems(Int)
        case addNoise(Int)
    }
    struct State: Codable, Sendable, Equatable {
        var isLoading = false
        var items = 0
        var noise = 0
    }

    let initialState = State()
    let runtime = ReactorRuntime<LoaderReactor>()
    private let clock: TestClock
    private let global: OneThenSignal<Mutation>?

    init(clock: TestClock, global: OneThenSignal<Mutation>? = nil) {
        self.clock = clock
        self.global = global
    }

    func mutate(action: Action) -> Mutations<Mutation> {
        let load = Mutations<Mutation>.just(.setItems(1)).delayed(by: .milliseconds(100), clock: clock)
        switch action {
        case .load:
            return .concat(.just(.setLoading(true)), load.cancellable(id: "load"), .just(.setLoading(false)))
        case .loadWithNoise:
            return .merge(
                load.cancellable(id: "load"),
                Mutations.just(.addNoise(1)).delayed(by: .milliseconds(200), clock: clock))
        case .latestLoad:
            return .concat(
                .just(.setLoading(true)), load.cancellable(id: "load", cancelInFlight: true),
                .just(.setLoading(false)))
        case .cancel:
            return .cancel(id: "load")
        }
    }

    func reduce(state: State, mutation: Mutation) -> State {
        var state = state
        switch mutation {
        case .setLoading(let isLoading): state.isLoading = isLoading
        case .setItems(let items): state.items = items
        case .addNoise(let amount): state.noise += amount
        }
        return state
    }

    func transform(mutation: Flow<Mutation>) -> Flow<Mutation> {
        guard let global else { return mutation }
        return mutation.merge(with: global)
    }
}

/// A stream of one element that says when it is asked for the next one, then ends.
private struct OneThenSignal<Element: Sendable>: AsyncSequence, Sendable {
    let value: Element
    let asked: AsyncStream<Void>.Continuation

    struct AsyncIterator: AsyncIteratorProtocol {
        let value: Element
        let asked: AsyncStream<Void>.Continuation
        var sent = false

        mutating func next() async -> Element? {
            if !sent {
                sent = true
                return value
            }
            asked.yield()
            asked.finish()
            return nil
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(value: value, asked: asked) }
}
