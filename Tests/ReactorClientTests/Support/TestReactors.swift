import ReactorClient
import ReactorCore
import ReactorExamples

/// The counter as an outdated app would know it: the same state, but an action the server does
/// not have (`reset`) and one that can carry any payload (`note`).
final class OutdatedCounter: Reactor {
    enum Action: Codable, Sendable {
        case increase
        case reset
        case note(String)
    }
    typealias State = CounterReactor.State

    let initialState = State()
    let runtime = ReactorRuntime<OutdatedCounter>()

    func reduce(state: State, mutation: Action) -> State { state }
}

extension RemoteEvent {
    /// The version of a state event.
    var version: UInt64? {
        if case .state(let state) = self { return state.version }
        return nil
    }

    /// The status of a connection event.
    var status: ConnectionStatus? {
        if case .connection(let status) = self { return status }
        return nil
    }
}

extension Array {
    /// The versions of the state events among these events.
    func versions<State>() -> [UInt64] where Element == RemoteEvent<State> { compactMap(\.version) }

    /// The latest connection status among these events. States may follow it at once (a
    /// reopened stream sends the current state), so it need not be the last event.
    func lastStatus<State>() -> ConnectionStatus? where Element == RemoteEvent<State> {
        last { $0.status != nil }?.status
    }
}
