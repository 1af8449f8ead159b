extension Reactor {
    /// The latest published state (after ``transform(state:)``). Safe to read from any thread.
    @inlinable public var currentState: State { runtime.currentUpdate(self).state }

    /// The latest published state with its version.
    @inlinable public var currentUpdate: StateUpdate<State> { runtime.currentUpdate(self) }

    /// Sends an action. Never awaits and never blocks on another sender's user code: when the
    /// reactor is idle the calling thread applies the action (and its immediate mutations)
    /// before returning; otherwise the thread already applying actions picks it up.
    @inlinable @discardableResult
    public func send(_ action: Action) -> ActionReceipt {
        // Without `refuseWhenStalled` the action is always queued.
        runtime.send(action, reactor: self)!
    }

    /// Sends an action unless the reactor is stalled (see ``isStalled``) or disposed; then
    /// returns `nil` and queues nothing, since an action queued behind a stalled turn may never be
    /// applied. A receipt means a live reactor took the action. For hosts; authors use ``send(_:)``.
    ///
    /// `whenAccepted` hears the action's sequence as it is taken, before anything can apply it:
    /// a host records the action there, so that its record always precedes what it produces.
    /// It also hears the backlog: how many actions taken before it are not yet applied.
    /// It runs under the runtime's lock: it must be quick and must not call into the reactor.
    @inlinable
    package func sendUnlessStalled(
        _ action: Action, whenAccepted: (_ sequence: UInt64, _ backlog: UInt64) -> Void = { _, _ in }
    ) -> ActionReceipt? {
        runtime.send(action, reactor: self, refuseWhenStalled: true, whenAccepted: whenAccepted)
    }

    /// Calls `body` once the action `receipt` stands for has been applied: its immediate
    /// mutations reduced (what it runs later may still be going; see ``whenSettled(_:_:)`` for
    /// that), or the reactor disposed. Calls it before returning when that is already so. For
    /// hosts that hold an acknowledgement back while a reactor is behind.
    package func whenProcessed(_ receipt: ActionReceipt, _ body: @escaping @Sendable () -> Void) {
        runtime.whenProcessed(receipt, body)
    }

    /// Has `executor`'s threads apply this reactor's actions and mutations from now on,
    /// instead of the thread that finds the reactor idle; `send` then returns at once.
    /// `onStall` hears `true` when a turn runs past the executor's stall timeout (user code
    /// that loops or blocks) and `false` when it returns. For hosts.
    package func applyActions(on executor: any ActionExecutor, onStall: (@Sendable (Bool) -> Void)? = nil) {
        runtime.applyActions(on: executor, onStall: onStall)
    }

    /// Whether the reactor's `mutate`, `reduce` or transforms have run past its executor's
    /// stall timeout without returning. Always false for a reactor with no executor. For hosts.
    package var isStalled: Bool { runtime.isStalled }

    /// The action input, like ReactorKit's `reactor.action` subject: `reactor.action.send(.increase)`.
    public var action: ActionInput<Self> { ActionInput(reactor: self) }

    /// The hot state stream: each iteration starts with the latest state, then every later one.
    public var state: StateStream<State> {
        let weakReactor = WeakReference(self)
        return StateStream { receive, finish in
            guard let reactor = weakReactor.value else {
                finish()
                return nil
            }
            return reactor.runtime.addObserver(reactor, receive: { receive(StateUpdate(version: $1, state: $0)) }, finish: finish)
        }
    }

    /// Registers a synchronous observer, called serially in version order: first with the
    /// current state (at once when the reactor is idle, otherwise by the thread applying
    /// actions, before any later state), then with every published state.
    ///
    /// The observer runs on the thread applying actions: keep it short and do not block.
    public func observe(_ observer: @escaping @Sendable (StateUpdate<State>) -> Void) -> ObservationToken {
        runtime.addObserver(self) { observer(StateUpdate(version: $1, state: $0)) }
    }

    /// The same as ``observe(_:)``, with the state and its version as two arguments.
    ///
    /// For code generic over the reactor's type: building or reading a `StateUpdate<State>` there
    /// looks its type up at run time, once per state, which this form never needs.
    package func observeStates(_ observer: @escaping @Sendable (_ state: State, _ version: UInt64) -> Void) -> ObservationToken {
        runtime.addObserver(self, receive: observer)
    }

    /// Registers an observer of mutation errors.
    public func observeErrors(_ observer: @escaping @Sendable (MutationFailure) -> Void) -> ObservationToken {
        runtime.addErrorObserver(observer)
    }

    /// ``observeStates(_:)`` for an observer that stays registered until ``dispose()``: no token
    /// is made, so there is none to keep — for code hosting many reactors, where a token and
    /// what it holds are a good part of an idle reactor's memory.
    package func observeStatesUntilDisposed(_ observer: @escaping @Sendable (_ state: State, _ version: UInt64) -> Void) {
        _ = runtime.registerObserver(self, receive: observer, finish: nil)
    }

    /// ``observeErrors(_:)`` for an observer that stays registered until ``dispose()``, with no
    /// token (see ``observeStatesUntilDisposed(_:)``).
    package func observeErrorsUntilDisposed(_ observer: @escaping @Sendable (MutationFailure) -> Void) {
        _ = runtime.registerErrorObserver(observer, finish: nil)
    }

    /// Tells `observer` of every action from now on as it settles (see ``whenSettled(_:_:)``),
    /// with its sequence, on the thread that settled it, until ``dispose()``: for code hosting many
    /// reactors, one observer instead of a callback per action. An action cut off by
    /// ``dispose()`` does not settle. A later call replaces the observer.
    package func observeSettlementsUntilDisposed(_ observer: @escaping @Sendable (_ sequence: UInt64) -> Void) {
        runtime.observeSettlements(observer)
    }

    /// Mutation errors from now on, as a stream; it finishes when the reactor is disposed.
    public var errors: AsyncStream<MutationFailure> {
        let (stream, continuation) = AsyncStream.makeStream(of: MutationFailure.self)
        let token = runtime.addErrorObserver(
            { continuation.yield($0) },
            finish: { continuation.finish() }
        )
        continuation.onTermination = { _ in token.cancel() }
        return stream
    }

    /// Calls `body` once, when every mutation of the action `receipt` stands for has been
    /// reduced, has failed or was cancelled, or the reactor was disposed. Calls it before
    /// returning when that is already so.
    ///
    /// A part cancelled by its id (``Mutations/cancellable(id:cancelInFlight:)``) counts as
    /// settled the moment it is cancelled, even while its work, ignoring cancellation, still
    /// runs: nothing it sends from then on is reduced.
    public func whenSettled(_ receipt: ActionReceipt, _ body: @escaping @Sendable () -> Void) {
        runtime.whenSettled(receipt, body)
    }

    /// Returns once the action `receipt` stands for has settled (see ``whenSettled(_:_:)``).
    public func settled(_ receipt: ActionReceipt) async {
        await withCheckedContinuation { continuation in
            whenSettled(receipt) { continuation.resume() }
        }
    }

    /// Cancels all in-flight work, finishes every stream, and calls ``didDispose()``.
    /// Later actions are ignored. Idempotent.
    public func dispose() { runtime.dispose(self) }

    /// Whether ``dispose()`` was called.
    public var isDisposed: Bool { runtime.isDisposed }

    /// While true, sent actions are recorded in ``stub`` and neither `mutate` nor `reduce` runs;
    /// what the `transform` hooks merge in (a global store's stream) is dropped too, so only
    /// ``Stub/state`` changes the state, as in ReactorKit.
    public var isStubEnabled: Bool {
        get { runtime.isStubEnabled }
        set { runtime.isStubEnabled = newValue }
    }

    /// The stub: recorded actions and a settable state (for testing views and routes).
    public var stub: Stub<Self> { Stub(reactor: self) }
}

/// The action input of a reactor, after ReactorKit's action subject.
public struct ActionInput<R: Reactor>: Sendable {
    let reactor: R

    /// Sends an action; see ``Reactor/send(_:)``.
    @discardableResult
    public func send(_ action: R.Action) -> ActionReceipt { reactor.send(action) }
}

/// A reactor's stub, active while ``Reactor/isStubEnabled`` is true.
public struct Stub<R: Reactor>: Sendable {
    let reactor: R

    /// The actions sent while the stub was enabled, in order.
    public var actions: [R.Action] { reactor.runtime.stubActions }

    /// The current state; setting it publishes the new state to every subscriber and makes it
    /// the reactor's ``Reactor/currentState``.
    public var state: R.State {
        get { reactor.currentState }
        nonmutating set { reactor.runtime.setStubState(newValue, reactor: reactor) }
    }
}
