import ReactorExamples
import ReactorServerKit

/// The example reactors `reactor-server` serves.
enum ExampleReactors {
    /// - Parameter room: the room every room instance joins.
    static func register(in registry: inout ReactorRegistry, counterDelay: Duration, searchLatency: Duration, room: Room) {
        registry.register(
            "counter",
            summary: "ReactorKit's Counter: each action shows loading, changes the value after a delay, then alerts",
            exampleActions: CounterReactor.exampleActions
        ) { CounterReactor(delay: counterDelay) }
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
            summary: "A chat room shared by every instance (on every node, with a postgres store): one instance's message reaches all of them",
            exampleActions: RoomReactor.exampleActions
        ) { RoomReactor(room: room) }
    }
}
