/// Whether a ``RemoteReactor``'s event stream is open.
public enum ConnectionStatus: Sendable, Equatable {
    /// Nothing consumes the states, so no stream is open.
    case idle
    /// Connecting for the first time.
    case connecting
    /// The stream is open: states arrive as the server publishes them.
    case connected
    /// The stream dropped, or the server ended it meaning "come back"; the client waits, then
    /// reconnects and resumes after the last version it has.
    case reconnecting
    /// The instance ended for good (see ``RemoteReactor/endReason``).
    case ended
}

/// Everything a ``RemoteReactor`` hears from its instance, in order.
public enum RemoteEvent<State: Sendable>: Sendable {
    /// A new state (the first event is the state the client had when the iteration began).
    case state(VersionedState<State>)
    /// An action's mutations threw on the server; the instance keeps running.
    case mutationFailed(MutationFailure)
    /// The stream opened, dropped or ended.
    case connection(ConnectionStatus)
    /// The instance ended for good; the last event.
    case ended(EndReason)
}

/// The events of a ``RemoteReactor``: each iteration is a subscriber of its own and keeps the
/// event stream open while it runs; it finishes when the instance ends for good or its task is
/// cancelled.
public struct RemoteEvents<State: Sendable>: AsyncSequence, Sendable {
    public typealias Element = RemoteEvent<State>
    public typealias Failure = Never

    let subscribe: @Sendable () -> AsyncStream<RemoteEvent<State>>

    /// Subscribes: the event stream opens if it was not open.
    public func makeAsyncIterator() -> AsyncStream<RemoteEvent<State>>.Iterator {
        subscribe().makeAsyncIterator()
    }
}

/// The states of a ``RemoteReactor``, with their versions: the current state first, then each
/// new one. Like ``RemoteEvents`` (of which it is the states), each iteration keeps the event
/// stream open while it runs and finishes when the instance ends for good (then
/// ``RemoteReactor/endReason`` says why) or its task is cancelled.
public struct RemoteStates<State: Sendable>: AsyncSequence, Sendable {
    public typealias Element = VersionedState<State>
    public typealias Failure = Never

    let events: RemoteEvents<State>

    /// Subscribes: the event stream opens if it was not open.
    public func makeAsyncIterator() -> Iterator {
        Iterator(events: events.makeAsyncIterator())
    }

    /// Reads the next state, passing over the other events.
    public struct Iterator: AsyncIteratorProtocol {
        var events: AsyncStream<RemoteEvent<State>>.Iterator

        /// The next state, or nil once the instance ended or the task was cancelled.
        public mutating func next() async -> VersionedState<State>? {
            while let event = await events.next() {
                if case .state(let state) = event { return state }
            }
            return nil
        }

        /// The next state, read on `actor`.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> VersionedState<State>? {
            while let event = await events.next(isolation: actor) {
                if case .state(let state) = event { return state }
            }
            return nil
        }
    }
}
