import ReactorCore

/// ReactorKit's counter, made with a step: each action changes the value by `step`, showing a
/// loading state while it does.
public final class CounterReactor: Reactor {
    public enum Action: String, Codable, Sendable {
        case increase
        case decrease
    }

    public enum Mutation: Sendable {
        case change(by: Int)
        case setLoading(Bool)
    }

    public struct State: Codable, Sendable, Equatable {
        public var value = 0
        public var isLoading = false
        public init() {}
    }

    /// What a client sends to create a counter: `{"type":"counter","parameters":{"step":5}}`.
    public struct Parameters: Codable, Sendable {
        /// How much each action changes the value; 1 when absent.
        public var step: Int?
        public init(step: Int? = nil) { self.step = step }
    }

    /// The steps a counter may be made with. `reduce` must never trap (an overflow stops the
    /// whole server): a bounded step keeps the value far from `Int`'s limits.
    public static let steps = 1...1_000_000

    public let initialState = State()
    public let runtime = ReactorRuntime<CounterReactor>()
    private let step: Int

    /// A counter changing by `step`, one of ``steps`` (the service checks its clients' steps).
    public init(step: Int = 1) {
        self.step = step
    }

    public func mutate(action: Action) -> Mutations<Mutation> {
        .concat(
            .just(.setLoading(true)),
            .just(.change(by: action == .increase ? step : -step)),
            .just(.setLoading(false))
        )
    }

    /// After a crash, what each acknowledged action cut off mid-flight had not done: its second
    /// mutation changes the value, so one that reduced fewer than two changes it now; then the
    /// loading state ends. Every acknowledged action changes the value exactly once.
    public func recover(interrupted actions: [InterruptedAction<Action>]) -> Mutations<Mutation> {
        let unchanged = actions.filter { $0.reducedMutations < 2 }
        return .concat(unchanged.map { .just(.change(by: $0.action == .increase ? step : -step)) } + [.just(.setLoading(false))])
    }

    public func reduce(state: State, mutation: Mutation) -> State {
        var state = state
        switch mutation {
        case .change(let amount): state.value += amount
        case .setLoading(let isLoading): state.isLoading = isLoading
        }
        return state
    }
}
