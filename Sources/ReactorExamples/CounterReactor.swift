import ReactorCore

/// A port of ReactorKit's Counter example: every action shows a loading state, changes the
/// value after a delay, hides the loading state and shows an alert — four states per action.
public final class CounterReactor: Reactor {
    /// What the user can do.
    public enum Action: String, Codable, Sendable, CaseIterable {
        case increase
        case decrease
    }

    /// How the state changes.
    public enum Mutation: Sendable, Equatable {
        case increaseValue
        case decreaseValue
        case setLoading(Bool)
        case setAlertMessage(String)
    }

    /// What the user sees.
    public struct State: Codable, Sendable, Equatable {
        /// The counter.
        public var value: Int
        /// True while a change is pending.
        public var isLoading: Bool
        /// An alert shown after each change; every assignment counts, even of the same text.
        @Pulse public var alertMessage: String?

        /// A state with the given value, not loading, with no alert.
        public init(value: Int = 0, isLoading: Bool = false, alertMessage: Pulse<String?> = Pulse(wrappedValue: nil)) {
            self.value = value
            self.isLoading = isLoading
            self._alertMessage = alertMessage
        }
    }

    /// Actions shown to clients as examples.
    public static let exampleActions: [Action] = Action.allCases

    /// A value of 0, not loading, no alert.
    public let initialState = State()
    /// The reactor runtime.
    public let runtime = ReactorRuntime<CounterReactor>()

    private let delay: Duration
    private let clock: any Clock<Duration>
    /// How much each action changes the value.
    private let step: Int

    /// A counter whose value changes by `step` `delay` after each action, measured on `clock`.
    /// A zero delay applies every action at once, without a task.
    public init(delay: Duration = .milliseconds(500), clock: any Clock<Duration> = ContinuousClock(), step: Int = 1) {
        self.delay = delay
        self.clock = clock
        self.step = step
    }

    /// The mutations an action produces.
    public func mutate(action: Action) -> Mutations<Mutation> {
        let change: Mutation = action == .increase ? .increaseValue : .decreaseValue
        return .concat(
            .just(.setLoading(true)),
            Mutations.just(change).delayed(by: delay, clock: clock),
            .just(.setLoading(false)),
            .just(.setAlertMessage(action == .increase ? "increased!" : "decreased!"))
        )
    }

    /// After a crash: finishes what each interrupted action had not done. Its first mutation
    /// shows the loading state and its second changes the value, so an action cut off before
    /// its second changes the value now; then the loading state ends. Every acknowledged action
    /// changes the value exactly once, and the counter is never left loading.
    public func recover(interrupted actions: [InterruptedAction<Action>]) -> Mutations<Mutation> {
        let unchanged = actions.filter { $0.reducedMutations < 2 }
        let changes = unchanged.map { Mutations<Mutation>.just($0.action == .increase ? .increaseValue : .decreaseValue) }
        return .concat(changes + [.just(.setLoading(false))])
    }

    /// The state after one mutation.
    public func reduce(state: State, mutation: Mutation) -> State {
        var state = state
        switch mutation {
        case .increaseValue: state.value += step
        case .decreaseValue: state.value -= step
        case .setLoading(let isLoading): state.isLoading = isLoading
        case .setAlertMessage(let message): state.alertMessage = message
        }
        return state
    }
}

/// What a client may create a counter with: `{"type":"counter","parameters":{"step":5}}`.
public struct CounterParameters: Codable, Sendable, Equatable {
    /// How much each action changes the value; 1 when absent.
    public var step: Int?

    /// Parameters with this step.
    public init(step: Int? = nil) {
        self.step = step
    }
}
