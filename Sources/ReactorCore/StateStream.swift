/// A reactor's hot state stream.
///
/// Each iterator starts with the reactor's latest state, then receives every later state in
/// order (buffered without bound per iterator, so a slow consumer sees every state; use
/// ``Reactor/observe(_:)`` to conflate instead). It finishes when the reactor is disposed or
/// released. Any number of iterators may run at once.
public struct StateStream<State: Sendable>: AsyncSequence, Sendable {
    /// Each element is a published state.
    public typealias Element = State
    /// The stream never throws; it ends when the reactor is disposed.
    public typealias Failure = Never

    /// Registers a subscriber: `receive` gets updates, `finish` ends the stream.
    let subscribe:
        @Sendable (
            _ receive: @escaping @Sendable (StateUpdate<State>) -> Void,
            _ finish: @escaping @Sendable () -> Void
        ) -> ObservationToken?

    /// The stream with each state's version.
    public var updates: AsyncStream<StateUpdate<State>> {
        let (stream, continuation) = AsyncStream.makeStream(of: StateUpdate<State>.self)
        let token = subscribe({ continuation.yield($0) }, { continuation.finish() })
        continuation.onTermination = { _ in token?.cancel() }
        return stream
    }

    /// Starts a subscription.
    public func makeAsyncIterator() -> Iterator {
        Iterator(base: updates.makeAsyncIterator())
    }

    /// Iterates one subscription.
    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncStream<StateUpdate<State>>.Iterator

        /// The next state, or `nil` once the reactor is disposed.
        public mutating func next() async -> State? {
            await base.next()?.state
        }

        /// The next state, or `nil` once the reactor is disposed.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> State? {
            await base.next(isolation: actor)?.state
        }
    }
}
