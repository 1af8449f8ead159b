import Metrics
import ReactorCore

/// Global state: every instance is a member of one shared ``Room``. One instance's `say`
/// reaches every instance's state, because each merges the room's event stream in
/// ``transform(mutation:)``. An instance leaves the room when disposed or released.
public final class RoomReactor: Reactor {
    /// What the user can do.
    public enum Action: Codable, Sendable, Equatable {
        case setName(name: String)
        case say(text: String)
    }

    /// How the state changes.
    public enum Mutation: Sendable, Equatable {
        case setName(String)
        case room(Room.Event)
    }

    /// What the user sees.
    public struct State: Codable, Sendable, Equatable {
        /// This member's name.
        public var name: String
        /// The room's last messages, oldest first.
        public var messages: [Room.Message] = []
        /// Everyone in the room.
        public var members: [Room.Member] = []

        /// A state for a member called `name`, before the room's snapshot arrives.
        public init(name: String) { self.name = name }
    }

    /// Actions shown to clients as examples.
    public static let exampleActions: [Action] = [.setName(name: "ada"), .say(text: "hello")]

    /// A guest with an empty room, until the room's snapshot arrives.
    public let initialState: State
    /// The reactor runtime.
    public let runtime = ReactorRuntime<RoomReactor>()

    private let room: Room
    /// This instance's id in the room.
    public let memberID: UInt64

    /// Messages said in rooms of this process, through swift-metrics as any app would count
    /// them: with the metrics system bootstrapped (reactor-server does), on `/metrics`.
    static let messagesSaid = Counter(label: "room_messages_said_total")

    /// Joins `room` (the process-wide room by default) as a guest.
    public init(room: Room = .shared) {
        self.room = room
        let name = "guest"
        self.memberID = room.join(name: name)
        self.initialState = State(name: name)
    }

    deinit { room.leave(member: memberID) }

    /// Renaming and speaking are side effects on the shared room.
    public func mutate(action: Action) -> Mutations<Mutation> {
        let (room, memberID) = (self.room, self.memberID)
        switch action {
        case .setName(let name):
            return .concat(.just(.setName(name)), .run { _ in room.rename(member: memberID, to: name) })
        case .say(let text):
            Self.messagesSaid.increment()
            return .run { _ in room.say(text, from: memberID) }
        }
    }

    /// Merges the room's events: how one instance's message reaches every instance.
    public func transform(mutation: Flow<Mutation>) -> Flow<Mutation> {
        mutation.merge(with: room.events().map { Mutation.room($0) })
    }

    /// The state after one mutation.
    public func reduce(state: State, mutation: Mutation) -> State {
        var state = state
        switch mutation {
        case .setName(let name):
            state.name = name
        case .room(.snapshot(let messages, let members)):
            state.messages = messages
            state.members = members
        case .room(.message(let message)):
            state.messages.append(message)
            state.messages.removeFirst(max(0, state.messages.count - room.historyLimit))
        case .room(.members(let members)):
            state.members = members
        }
        return state
    }

    /// Leaves the room.
    public func didDispose() { room.leave(member: memberID) }
}
