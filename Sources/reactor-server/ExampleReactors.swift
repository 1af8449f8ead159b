import ReactorExamples
import ReactorServerKit

/// The example reactors `reactor-server` serves.
enum ExampleReactors {
    /// - Parameter room: the room every room instance joins.
    static func register(in registry: inout ReactorRegistry, counterDelay: Duration, searchLatency: Duration, room: Room) {
        registry.register(
            "counter",
            summary:
                "ReactorKit's Counter: each action shows loading, changes the value after a delay, then alerts; created with an optional step",
            exampleActions: CounterReactor.exampleActions,
            exampleParameters: CounterParameters(step: 1)
        ) { (parameters: CounterParameters, _) in
            guard let step = parameters.step else { return CounterReactor(delay: counterDelay) }
            guard (1...1_000_000).contains(step) else { throw CounterStepOutOfRange(step: step) }
            return CounterReactor(delay: counterDelay, step: step)
        }
        registry.register(
            "todo",
            summary: "A to-do list after RxTodo: add, toggle, edit, delete and move tasks",
            exampleActions: TodoReactor.exampleActions
        ) { TodoReactor() }
        registry.register(
            "search",
            summary: "GitHubSearch over a bundled list of Swift packages; a newer query cancels the one in flight",
            exampleActions: SearchReactor.exampleActions
        ) { SearchReactor(latency: searchLatency) }
        registry.register(
            "room",
            summary:
                "A chat room shared by every instance (on every node, with a postgres store): one instance's message reaches all of them",
            exampleActions: RoomReactor.exampleActions
        ) { RoomReactor(room: room) }
    }
}

/// A counter's step must be from 1 to 1,000,000.
struct CounterStepOutOfRange: Error, CustomStringConvertible {
    let step: Int
    var description: String { "'step' must be from 1 to 1000000, not \(step)" }
}
