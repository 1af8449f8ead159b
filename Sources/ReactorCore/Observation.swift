import Locking

/// What `send(_:)` returns: the action's sequence number on its instance (1, 2, 3 …).
///
/// Pass it to ``Reactor/whenSettled(_:_:)`` to learn when the action's mutations have finished.
public struct ActionReceipt: Sendable, Hashable {
    /// The action's position among all actions sent to this instance, starting at 1.
    public let sequence: UInt64

    /// Wraps a sequence number.
    @inlinable public init(sequence: UInt64) { self.sequence = sequence }
}

/// A published state and its version: 0 for the initial state, +1 for every published state.
public struct StateUpdate<State: Sendable>: Sendable {
    /// Strictly increasing on one instance.
    public let version: UInt64
    /// The transformed state, as `currentState` shows it.
    public let state: State

    /// Pairs a state with its version.
    @inlinable public init(version: UInt64, state: State) {
        self.version = version
        self.state = state
    }
}

/// An error thrown while producing an action's mutations (or by a merged source).
///
/// It ended that action's mutations only; the reactor kept working.
public struct MutationFailure: Sendable, Hashable {
    /// The sequence number of the action whose mutations failed; `nil` for a merged source.
    public let actionSequence: UInt64?
    /// The error's type, fully qualified (`String(reflecting:)`).
    public let errorType: String
    /// The error's description (`String(describing:)`).
    public let message: String

    /// Describes a failure.
    public init(actionSequence: UInt64?, errorType: String, message: String) {
        self.actionSequence = actionSequence
        self.errorType = errorType
        self.message = message
    }

    /// Describes `error`, thrown for the action `actionSequence`.
    public init(actionSequence: UInt64?, error: any Error) {
        self.init(
            actionSequence: actionSequence,
            errorType: String(reflecting: type(of: error)),
            message: String(describing: error)
        )
    }
}

/// Keeps an observer registered; ``cancel()`` (or releasing the token) unregisters it.
public final class ObservationToken: Sendable {
    private let onCancel: Locked<(@Sendable () -> Void)?>

    /// A token that runs `onCancel` once, on the first ``cancel()`` or on deinit.
    public init(onCancel: @escaping @Sendable () -> Void) {
        self.onCancel = Locked(onCancel)
    }

    /// Unregisters the observer and lets go of it (and of what its closure holds): at once, or,
    /// while the reactor is applying actions, as soon as the work in hand is applied.
    /// Idempotent. A call already under way may still complete.
    public func cancel() {
        let action = onCancel.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }

    deinit { cancel() }
}
