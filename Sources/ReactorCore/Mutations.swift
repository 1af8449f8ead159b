/// The mutations one action produces: zero, one or many, at once or over time.
///
/// `Mutations` is a description, not a running stream. The runtime reduces the parts that are
/// available at once (``just(_:)``, ``empty``, `concat` of those, a zero
/// ``delayed(by:clock:)``) inline, on the thread that sent the action, without creating a task.
/// Only parts that truly wait (``run(_:)``, a non-zero delay, an `AsyncSequence`) get a task,
/// and their mutations re-enter the reactor's queue in order.
///
/// ```swift
/// func mutate(action: Action) -> Mutations<Mutation> {
///     switch action {
///     case .increase:
///         return .concat(
///             .just(.setLoading(true)),
///             Mutations.just(.increaseValue).delayed(by: .milliseconds(500), clock: clock),
///             .just(.setLoading(false))
///         )
///     }
/// }
/// ```
public struct Mutations<Mutation: Sendable>: Sendable {
    @usableFromInline let node: Node

    @inlinable init(_ node: Node) { self.node = node }

    /// The shape of a description; internal so the runtime can tell immediate parts from waiting ones.
    @usableFromInline enum Node: Sendable {
        case empty
        case just(Mutation)
        case concat([Mutations])
        case merge([Mutations])
        case fail(any Error)
        case run(@Sendable (MutationSender<Mutation>) async throws -> Void)
        case delayed(Duration, any Clock<Duration>, Box)
        case cancellable(CancelID, cancelInFlight: Bool, Box)
        case cancel(CancelID)
    }

    /// Holds a nested description, so `Node` stays a flat enum (a `.just` never allocates).
    @usableFromInline final class Box: Sendable {
        @usableFromInline let mutations: Mutations
        @inlinable init(_ mutations: Mutations) { self.mutations = mutations }
    }

    /// No mutation.
    @inlinable public static var empty: Mutations { Mutations(.empty) }

    /// Exactly one mutation, available at once.
    @inlinable public static func just(_ mutation: Mutation) -> Mutations { Mutations(.just(mutation)) }

    /// The parts one after another: each part starts when the previous one has finished.
    @inlinable public static func concat(_ parts: Mutations...) -> Mutations { concat(parts) }

    /// The parts one after another: each part starts when the previous one has finished.
    @inlinable public static func concat(_ parts: [Mutations]) -> Mutations { Mutations(.concat(parts)) }

    /// The parts all at once; their mutations interleave as they arrive.
    ///
    /// An error in one part is reported and ends that part only.
    @inlinable public static func merge(_ parts: Mutations...) -> Mutations { merge(parts) }

    /// The parts all at once; their mutations interleave as they arrive.
    @inlinable public static func merge(_ parts: [Mutations]) -> Mutations { Mutations(.merge(parts)) }

    /// Ends the action's mutations with `error`; the reactor reports it as a ``MutationFailure``
    /// and keeps working.
    @inlinable public static func fail(_ error: any Error) -> Mutations { Mutations(.fail(error)) }

    /// Asynchronous work (a side effect) that sends mutations through `send` as it goes.
    ///
    /// The work runs in a task owned by the reactor: it is cancelled when the reactor is disposed
    /// or when a ``cancellable(id:cancelInFlight:)`` part with the same id cancels it. Work that
    /// ignores cancellation runs on, but what it sends after that is dropped. A thrown error
    /// (other than cancellation) ends this action's mutations and is reported.
    public static func run(
        _ body: @escaping @Sendable (_ send: MutationSender<Mutation>) async throws -> Void
    ) -> Mutations {
        Mutations(.run(body))
    }

    /// Every element of `sequence`, as it arrives; an error thrown by the sequence ends it and
    /// is reported.
    public init<Sequence: AsyncSequence & Sendable>(_ sequence: Sequence) where Sequence.Element == Mutation {
        self.init(
            .run { send in
                for try await mutation in sequence { send(mutation) }
            })
    }

    /// These mutations after `duration` on `clock`. A zero duration is immediate (no task).
    @inlinable public func delayed(by duration: Duration, clock: any Clock<Duration>) -> Mutations {
        if duration <= .zero { return self }
        return Mutations(.delayed(duration, clock, Box(self)))
    }

    /// `mutations` after `duration` on `clock`: the same as `mutations.delayed(by:clock:)`.
    @inlinable public static func delayed(
        by duration: Duration,
        clock: any Clock<Duration>,
        _ mutations: Mutations
    ) -> Mutations {
        mutations.delayed(by: duration, clock: clock)
    }

    /// Marks these mutations with `id`, so that ``cancel(id:)``, or a later `cancellable` part
    /// with the same id and `cancelInFlight`, ends them.
    ///
    /// The rule: cancelling an id ends exactly the mutations `cancellable(id:)` was applied to,
    /// as `take(until:)` ends the observable it is applied to in ReactorKit. What encloses them
    /// goes on: in `.concat(.just(.setLoading(true)), load.cancellable(id: "load"),
    /// .just(.setLoading(false)))`, cancelling `"load"` skips the rest of the load and the concat
    /// still ends loading; the other parts of a `merge` keep running. To cancel a whole concat,
    /// mark the concat itself. Mutations the cancelled part sends after it was cancelled are
    /// dropped; those it sent before are reduced. The part is over as it is cancelled: what
    /// encloses it goes on, and its action settles (see ``Reactor/whenSettled(_:_:)``), without
    /// waiting for work that ignores cancellation to return.
    ///
    /// With `cancelInFlight: true` every running part with this id is cancelled first: the
    /// "latest wins" idiom (`flatMapLatest` in ReactiveX).
    public func cancellable(id: some Hashable & Sendable, cancelInFlight: Bool = false) -> Mutations {
        Mutations(.cancellable(CancelID(id), cancelInFlight: cancelInFlight, Box(self)))
    }

    /// Cancels every running part marked with `id` (see ``cancellable(id:cancelInFlight:)``).
    public static func cancel(id: some Hashable & Sendable) -> Mutations {
        Mutations(.cancel(CancelID(id)))
    }
}

/// Sends mutations from a ``Mutations/run(_:)`` body into the reactor.
public struct MutationSender<Mutation: Sendable>: Sendable {
    @usableFromInline let emit: @Sendable (Mutation) -> Void

    @usableFromInline init(emit: @escaping @Sendable (Mutation) -> Void) { self.emit = emit }

    /// Sends one mutation; it is reduced in order after those sent before it.
    public func callAsFunction(_ mutation: Mutation) { emit(mutation) }

    /// Sends one mutation; the same as calling the sender.
    public func send(_ mutation: Mutation) { emit(mutation) }
}

/// A type-erased, sendable id for cancellable mutations.
@usableFromInline struct CancelID: Hashable, Sendable {
    /// Safe to send: it is only ever built from a value that is itself `Sendable` (see `init`),
    /// and `AnyHashable` adds no shared mutable state of its own.
    nonisolated(unsafe) let value: AnyHashable

    init(_ value: some Hashable & Sendable) { self.value = AnyHashable(value) }
}
