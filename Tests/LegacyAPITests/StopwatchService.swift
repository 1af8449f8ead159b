// A service as the README of release 0.0 taught it: the same code, which must still compile
// and serve. Two things differ: `import ReactorHosting`, where `ReactorRegistry` has lived since
// 0.1.0 (whose deprecated alias in `ReactorHTTP` said so, and went in 0.2.0), and the last lines:
// a test starts and stops the server instead of `dispatchMain()`.
import Dispatch
import MicroHTTP
import ReactorCore
import ReactorHTTP
import ReactorHosting

final class StopwatchReactor: Reactor {
    enum Action: Codable, Sendable {
        case start
        case lap(label: String)
    }

    enum Mutation: Sendable {
        case setRunning(Bool)
        case addLap(String)
    }

    struct State: Codable, Sendable {
        var isRunning = false
        var laps: [String] = []
    }

    let initialState = State()
    let runtime = ReactorRuntime<StopwatchReactor>()

    func mutate(action: Action) -> Mutations<Mutation> {
        switch action {
        case .start:
            return .just(.setRunning(true))
        case .lap(let label):
            // Side effects live here: .run gets a task owned by the instance, cancelled when
            // the instance is deleted or expires.
            return .concat(
                .run { send in
                    try await Task.sleep(for: .milliseconds(100))
                    send(.addLap(label))
                },
                .just(.setRunning(false))
            )
        }
    }

    func reduce(state: State, mutation: Mutation) -> State {
        var state = state
        switch mutation {
        case .setRunning(let isRunning): state.isRunning = isRunning
        case .addLap(let label): state.laps.append(label)
        }
        return state
    }
}

func makeStopwatchServer(port: UInt16) -> ReactorServer {
    var registry = ReactorRegistry()
    registry.register(
        "stopwatch", summary: "laps after a delay",
        exampleActions: [.start, .lap(label: "first")]
    ) { StopwatchReactor() }

    var http = HTTPServerConfiguration()
    http.port = port
    let server = ReactorServer(registry: registry, http: http)
    return server
}
