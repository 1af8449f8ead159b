import Dispatch
import Locking
import ReactorCore
import ReactorTesting
import Synchronization

/// A thread-safe log of events, for asserting the order hooks run in.
final class EventLog: Sendable {
    private let entries = Locked<[String]>([])
    func append(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }
    func clear() { entries.withLock { $0.removeAll() } }
}

struct TestError: Error, CustomStringConvertible {
    let description: String
}

/// Logs every hook it goes through.
final class HookReactor: Reactor {
    enum Action: String, Codable, Sendable { case tap }
    typealias Mutation = Action
    struct State: Codable, Sendable, Equatable { var taps = 0 }

    let initialState = State()
    let runtime = ReactorRuntime<HookReactor>()
    let log = EventLog()

    func transform(action: Flow<Action>) -> Flow<Action> {
        log.append("transform(action:)")
        return action.handleEvents { [log] _ in log.append("action") }
    }

    func mutate(action: Action) -> Mutations<Mutation> {
        log.append("mutate")
        return .just(action)
    }

    func transform(mutation: Flow<Mutation>) -> Flow<Mutation> {
        log.append("transform(mutation:)")
        return mutation.handleEvents { [log] _ in log.append("mutation") }
    }

    func reduce(state: State, mutation: Mutation) -> State {
        log.append("reduce")
        var state = state
        state.taps += 1
        return state
    }

    func transform(state: Flow<State>) -> Flow<State> {
        log.append("transform(state:)")
        return state.handleEvents { [log] _ in log.append("state") }
    }
}

/// Counts, fails on request, and can wait on a clock.
final class ProbeReactor: Reactor {
    enum Action: Codable, Sendable, Equatable {
        case add(Int)
        case fail
        case failLater
        case wait
        case send(sender: Int, index: Int)
    }

    enum Mutation: Sendable {
        case add(Int)
        case record(sender: Int, index: Int)
    }

    struct State: Codable, Sendable, Equatable {
        var total = 0
        var lastIndexBySender: [Int: Int] = [:]
        var outOfOrder = 0
    }

    let initialState = State()
    let runtime = ReactorRuntime<ProbeReactor>()
    let clock: TestClock
    let reducing = Atomic<Int>(0)
    let overlaps = Atomic<Int>(0)
    let reduceCount = Atomic<Int>(0)

    init(clock: TestClock = TestClock()) { self.clock = clock }

    func mutate(action: Action) -> Mutations<Mutation> {
        switch action {
        case .add(let amount):
            return .just(.add(amount))
        case .fail:
            return .concat(.just(.add(1)), .fail(TestError(description: "boom")), .just(.add(100)))
        case .failLater:
            let clock = clock
            return .run { send in
                send(.add(1))
                try await clock.sleep(for: .seconds(1))
                throw TestError(description: "late boom")
            }
        case .wait:
            return Mutations.just(.add(1)).delayed(by: .seconds(60), clock: clock)
        case .send(let sender, let index):
            return .just(.record(sender: sender, index: index))
        }
    }

    func reduce(state: State, mutation: Mutation) -> State {
        if reducing.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue != 1 {
            overlaps.wrappingAdd(1, ordering: .relaxed)
        }
        defer { reducing.wrappingSubtract(1, ordering: .acquiringAndReleasing) }
        reduceCount.wrappingAdd(1, ordering: .relaxed)
        var state = state
        switch mutation {
        case .add(let amount):
            state.total += amount
        case .record(let sender, let index):
            state.total += 1
            if let last = state.lastIndexBySender[sender], last >= index { state.outOfOrder += 1 }
            state.lastIndexBySender[sender] = index
        }
        return state
    }
}
