/// A reactor: a state machine that turns actions into mutations (with side effects) and
/// mutations into states, after ReactorKit.
///
/// ```swift
/// final class CounterReactor: Reactor {
///     enum Action: String, Codable, Sendable { case increase }
///     enum Mutation: Sendable { case increaseValue }
///     struct State: Codable, Sendable { var value = 0 }
///
///     let initialState = State()
///     let runtime = ReactorRuntime<CounterReactor>()
///
///     func mutate(action: Action) -> Mutations<Mutation> { .just(.increaseValue) }
///     func reduce(state: State, mutation: Mutation) -> State {
///         var state = state
///         state.value += 1
///         return state
///     }
/// }
/// ```
///
/// The pipeline, in ReactorKit's order: action → ``transform(action:)`` → ``mutate(action:)``
/// (mutations of several actions interleave) → ``transform(mutation:)`` → ``reduce(state:mutation:)``
/// (serially, starting from ``initialState``) → ``transform(state:)`` → ``currentState`` and
/// subscribers. `reduce` sees the untransformed state.
///
/// The runtime starts lazily, on first use: it reads ``initialState`` and calls the three
/// `transform` hooks once. It does not keep the reactor alive; when the reactor is released (or
/// ``dispose()``d) its in-flight work is cancelled and its streams finish.
public protocol Reactor: AnyObject, Sendable {
    /// What a user can do. Must round-trip through `Codable` (the HTTP layer decodes it).
    associatedtype Action: Codable & Sendable
    /// A change to apply to the state. Defaults to `Action`.
    associatedtype Mutation: Sendable = Action
    /// The state subscribers see. Encode it with stable keys.
    associatedtype State: Codable & Sendable

    /// The state before any action; read once, when the runtime starts.
    var initialState: State { get }

    /// Storage the runtime needs. Declare it as a constant naming the class itself:
    /// `let runtime = ReactorRuntime<CounterReactor>()` (Swift does not allow `Self` in a stored
    /// property's initialiser). Created there, where the type is known, the runtime's hot paths
    /// are compiled for the reactor.
    var runtime: ReactorRuntime<Self> { get }

    /// The mutations an action produces, with their side effects. Called once per action, on
    /// the thread that applies actions; it may read ``currentState`` and send further actions.
    /// Default when `Mutation == Action`: `.just(action)`.
    func mutate(action: Action) -> Mutations<Mutation>

    /// The state after one mutation. Pure and synchronous; never called concurrently on one
    /// instance. Sees the untransformed state.
    func reduce(state: State, mutation: Mutation) -> State

    /// Transforms the action stream before `mutate`. Default: unchanged.
    func transform(action: Flow<Action>) -> Flow<Action>

    /// Transforms the mutation stream before `reduce`. Default: unchanged.
    ///
    /// This is where global state comes in: merge a process-wide store's stream of mutations
    /// with ``Flow/merge(with:)`` and every instance reduces the store's changes. See ``Flow``.
    func transform(mutation: Flow<Mutation>) -> Flow<Mutation>

    /// Transforms the state stream after `reduce`: what ``currentState`` and subscribers see.
    /// Default: unchanged.
    func transform(state: Flow<State>) -> Flow<State>

    /// Called once after ``dispose()`` has cancelled the reactor's work (for example to leave a
    /// shared store). Default: nothing.
    func didDispose()

    /// What to do about actions a crash cut off mid-flight, when a durable host brings the
    /// reactor back: some of their mutations were reduced and kept, the rest were lost with the
    /// process. Called once, after ``currentState`` holds the recovered state, with those actions
    /// in the order they were sent, each with how many of its mutations were kept; the mutations
    /// it returns are applied like an action's. Such actions are never run again by themselves,
    /// and the host reports each one (an error naming its sequence number) whatever this
    /// returns. Should the process end again before they settle (a trap in `reduce` ends any
    /// process), the next activation does not call it for them again: it reports them as
    /// abandoned. Default: nothing.
    func recover(interrupted actions: [InterruptedAction<Action>]) -> Mutations<Mutation>
}

extension Reactor where Mutation == Action {
    /// Each action is its own mutation.
    public func mutate(action: Action) -> Mutations<Mutation> { .just(action) }
}

extension Reactor {
    /// Unchanged.
    public func transform(action: Flow<Action>) -> Flow<Action> { action }
    /// Unchanged.
    public func transform(mutation: Flow<Mutation>) -> Flow<Mutation> { mutation }
    /// Unchanged.
    public func transform(state: Flow<State>) -> Flow<State> { state }
    /// Nothing.
    public func didDispose() {}
    /// Nothing: the interrupted actions are only reported.
    public func recover(interrupted actions: [InterruptedAction<Action>]) -> Mutations<Mutation> { .empty }
}

/// An action a crash cut off mid-flight (see ``Reactor/recover(interrupted:)``).
public struct InterruptedAction<Action: Sendable>: Sendable {
    /// The action as it was sent.
    public let action: Action
    /// Its sequence number on the instance (what its acknowledgement said).
    public let sequence: UInt64
    /// How many of its mutations were reduced, in order, before the crash, and kept.
    public let reducedMutations: Int

    /// An interrupted action.
    public init(action: Action, sequence: UInt64, reducedMutations: Int) {
        self.action = action
        self.sequence = sequence
        self.reducedMutations = reducedMutations
    }
}
