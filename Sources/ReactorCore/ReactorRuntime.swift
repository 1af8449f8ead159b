// Over 450 lines: the per-instance pipeline kept in one readable place (its shared state, drainer and task runner are files of their own).
import Locking
import Synchronization

/// The storage and machinery behind a ``Reactor``: its queue, state, subscribers and tasks.
///
/// Declare one per reactor: `let runtime = ReactorRuntime<MyReactor>()`. Everything is reached
/// through the ``Reactor`` extension (`send`, `currentState`, `observe` …).
///
/// How actions are applied: `send` appends the action to a lock-protected queue. When nobody
/// is applying actions, the sending thread becomes the *drainer* and applies the queue in order
/// (without holding the lock while user code runs); otherwise it returns at once and the
/// current drainer picks the action up. Mutations available at once are reduced inline; only
/// waiting parts get a task, whose mutations re-enter the same queue. Since there is at most
/// one drainer, `reduce` is serial and every accepted action is applied exactly once, in order.
public final class ReactorRuntime<R: Reactor>: Sendable {
    // Stored properties are laid out in this order: the ones every action uses come first, so
    // that they share as few cache lines as possible.
    /// `notStarted`, `starting` (one thread is building the engine) or `started`.
    @usableFromInline let startPhase = Atomic<UInt8>(StartPhase.notStarted)
    @usableFromInline let shared = Locked(SharedState())

    /// State only the drainer touches. Safe without a lock because:
    /// - it is set once, by the one thread that moved `startPhase` to `starting`, before that
    ///   thread stores `started` there with release ordering, and read only after `started` was
    ///   loaded with acquire ordering;
    /// - afterwards its contents are used only by the thread that holds the `isDraining` flag,
    ///   which is taken and given back under `shared`'s lock (so each drainer sees the previous
    ///   drainer's writes). No two threads ever use it at once.
    /// For the same reasons the dynamic exclusivity checks are off (`@exclusivity(unchecked)`):
    /// they would run on every action and could never fire.
    @usableFromInline @exclusivity(unchecked) nonisolated(unsafe) var engine: Engine?
    /// What hears the calls into the reactor (see ``RuntimeProbe``), once a host sets one.
    let probeBox = SetOnceReference<RuntimeProbeBox>()

    /// Applies `first` if given, then queued work as the drainer (see `Drain.run(workLimit:)`).
    ///
    /// This and the two closures below are built in `init`, which is inlined where the reactor's
    /// type is known (`let runtime = ReactorRuntime<MyReactor>()`), so they are compiled for that
    /// type. The rest of the runtime reaches the reactor through generic code, which would look up
    /// type metadata for every mutation it handles. Built in generic code instead, they still
    /// work, only unspecialised.
    @usableFromInline let drainSpecialized:
        @Sendable (
            _ runtime: ReactorRuntime, _ reactor: R, _ first: FirstAction?,
            _ workLimit: Int
        ) -> Bool

    /// An action the sending thread applies before the queue (see `send`).
    @usableFromInline typealias FirstAction = (action: R.Action, sequence: UInt64)

    /// `enqueue` compiled for the reactor's type, for the same reason as `drainSpecialized`.
    @usableFromInline let enqueueSpecialized:
        @Sendable (
            _ runtime: ReactorRuntime, _ action: R.Action, _ reactor: R,
            _ refuseWhenStalled: Bool,
            _ whenAccepted: (_ sequence: UInt64, _ backlog: UInt64) -> Void
        ) -> ActionReceipt?

    /// Queues a turn for the reactor on `pool`, creating the turn with the reactor's type known.
    @usableFromInline let scheduleSpecialized: @Sendable (_ runtime: ReactorRuntime, _ reactor: R, _ pool: any ActionExecutor) -> Void

    /// Creates an idle runtime; it starts on the reactor's first use.
    @inlinable public init() {
        scheduleSpecialized = { runtime, reactor, pool in
            pool.schedule(PooledTurn(runtime: runtime, reactor: reactor, pool: pool))
        }
        drainSpecialized = { runtime, reactor, first, workLimit in
            // Only the thread holding the drainer role calls this, so it may use the engine.
            let drain = Drain(runtime: runtime, reactor: reactor, engine: runtime.engine!)
            if let first { drain.applyAction(first.action, sequence: first.sequence, entry: 0) }
            return drain.run(workLimit: workLimit)
        }
        enqueueSpecialized = { runtime, action, reactor, refuseWhenStalled, whenAccepted in
            runtime.enqueue(action, reactor: reactor, refuseWhenStalled: refuseWhenStalled, whenAccepted: whenAccepted)
        }
    }

    deinit {
        let released = shared.withLock { $0.shutDown() }
        released.finish()
    }

    // MARK: - Start

    /// The values of `startPhase`.
    @usableFromInline enum StartPhase {
        @inlinable static var notStarted: UInt8 { 0 }
        @inlinable static var starting: UInt8 { 1 }
        @inlinable static var started: UInt8 { 2 }
    }

    @inline(__always)
    @inlinable func ensureStarted(_ reactor: R) {
        if startPhase.load(ordering: .acquiring) != StartPhase.started { start(reactor) }
    }

    /// Starts the runtime on the first thread to get here; any other thread arriving meanwhile
    /// waits at the ``StartGate`` until the engine is there. (A reactor whose `initialState` or
    /// `transform` builders use the same reactor waits on itself, as it would on a lock.)
    @usableFromInline func start(_ reactor: R) {
        _ = start(reactor, restoring: nil)
    }

    /// Where a restored reactor resumes: its published state and version, and the last action
    /// sequence it had started.
    @usableFromInline struct Restored {
        @usableFromInline let state: R.State
        @usableFromInline let version: UInt64
        @usableFromInline let sequence: UInt64
    }

    /// Starts the runtime, from `restored` when given; false when it had started already.
    @usableFromInline func start(_ reactor: R, restoring restored: Restored?) -> Bool {
        let (claimed, _) = startPhase.compareExchange(
            expected: StartPhase.notStarted, desired: StartPhase.starting, ordering: .acquiring)
        guard claimed else {
            StartGate.shared.wait { startPhase.load(ordering: .acquiring) == StartPhase.started }
            return false
        }
        let engine = Engine(
            state: restored?.state ?? reactor.initialState,
            actionFlow: reactor.transform(action: .identity).compiled(),
            mutationFlow: reactor.transform(mutation: .identity).compiled(),
            stateFlow: reactor.transform(state: .identity).compiled()
        )
        let initial: StateUpdate<R.State>
        if let restored {
            // The stored state was published, so `transform(state:)` has already been applied.
            initial = StateUpdate(version: restored.version, state: restored.state)
            engine.processedThrough = restored.sequence
            engine.startedThrough = restored.sequence
        } else {
            initial = StateUpdate(version: 0, state: engine.stateFlow.apply(engine.state) ?? engine.state)
        }
        engine.latest = initial
        self.engine = engine
        shared.withLock { shared in
            shared.current = initial
            if let restored {
                shared.nextSequence = restored.sequence
                shared.processedThrough = restored.sequence
            }
        }
        startPhase.store(StartPhase.started, ordering: .releasing)
        StartGate.shared.broadcast()
        startSources(of: engine, reactor: reactor)
        return true
    }

    @usableFromInline func startSources(of engine: Engine, reactor: R) {
        // While the stub is enabled, what the transforms merge in is dropped, as the stub's state
        // stands in for the whole pipeline.
        for (entry, source) in engine.actionFlow.sources {
            startSource(source, reactor: reactor) { shared, action in
                if shared.isStubEnabled { return nil }
                shared.nextSequence += 1
                return .action(action, sequence: shared.nextSequence, entry: entry)
            }
        }
        for (entry, source) in engine.mutationFlow.sources {
            startSource(source, reactor: reactor) { shared, mutation in
                shared.isStubEnabled ? nil : .mutation(mutation, sequence: nil, task: nil, entry: entry)
            }
        }
        for (entry, source) in engine.stateFlow.sources {
            startSource(source, reactor: reactor) { shared, state in shared.isStubEnabled ? nil : .state(state, entry: entry) }
        }
    }

    @usableFromInline func startSource<Element>(
        _ source: FlowSource<Element>,
        reactor: R,
        work: @escaping @Sendable (inout SharedState, Element) -> Work?
    ) {
        let weakReactor = WeakReference(reactor)
        shared.withLock { shared in
            if shared.isDisposed { return }
            let id = shared.nextTaskID()
            shared.tasks[id] = TaskRecord(
                task: Task {
                    do {
                        try await source.run { element in
                            guard let reactor = weakReactor.value else { return false }
                            return reactor.runtime.submit(reactor: reactor) { work(&$0, element) }
                        }
                    } catch  where !(error is CancellationError) && !Task.isCancelled {
                        weakReactor.value?.runtime.report(MutationFailure(actionSequence: nil, error: error))
                    } catch {}
                },
                sequence: nil,
            )
        }
    }

    // MARK: - Sending

    /// Who applies the queue after a thread finds the reactor idle and takes the drainer role.
    @usableFromInline enum Drainer {
        /// Somebody else is draining (or the work was not queued): nothing to do.
        case none
        /// The calling thread.
        case caller
        /// A turn on the pool.
        case pool(any ActionExecutor)
    }

    /// The hot path: enqueue, and drain (or have the pool drain) if nobody else does.
    /// Returns `nil`, queuing nothing, when `refuseWhenStalled` and the reactor is stalled.
    /// `whenAccepted` hears the action's sequence once it is taken, before anything can apply it,
    /// and how many actions taken before it are not yet applied (under the runtime's lock: it
    /// must be quick and must not call into the reactor).
    @inlinable func send(
        _ action: R.Action, reactor: R, refuseWhenStalled: Bool = false,
        whenAccepted: (_ sequence: UInt64, _ backlog: UInt64) -> Void = { _, _ in }
    ) -> ActionReceipt? {
        enqueueSpecialized(self, action, reactor, refuseWhenStalled, whenAccepted)
    }

    /// `send`'s work, reached through `enqueueSpecialized`.
    @inlinable func enqueue(
        _ action: R.Action, reactor: R, refuseWhenStalled: Bool,
        whenAccepted: (_ sequence: UInt64, _ backlog: UInt64) -> Void
    ) -> ActionReceipt? {
        ensureStarted(reactor)
        let engine = self.engine!
        var settled: SettledActions?
        let accepted = shared.withLock { shared -> (UInt64, Drainer)? in
            // Hosts hear of a disposed runtime too, so that a receipt always means a live one took
            // the action.
            if refuseWhenStalled && (shared.isStalled || shared.isDisposed) { return nil }
            shared.nextSequence += 1
            let sequence = shared.nextSequence
            if shared.isDisposed { return (sequence, .none) }
            whenAccepted(sequence, sequence &- shared.processedThrough &- 1)
            if shared.isStubEnabled {
                shared.stubActions.append(action)
                let previous = shared.processedThrough
                shared.enqueueOrMarkProcessed(.skipped(sequence: sequence), sequence: sequence)
                settled = shared.settledSince(previous)
                return (sequence, .none)
            }
            if shared.isDraining || !shared.pending.isEmpty {
                shared.pending.append(.action(action, sequence: sequence, entry: 0))
                return (sequence, .none)
            }
            shared.isDraining = true
            if let pool = shared.drainPool {
                shared.pending.append(.action(action, sequence: sequence, entry: 0))
                return (sequence, .pool(pool))
            }
            // This thread is the drainer now, so it may use the engine.
            engine.observers = shared.observers
            return (sequence, .caller)
        }
        guard let (sequence, drainer) = accepted else { return nil }
        settled?.tell()
        if case .caller = drainer {
            // The action was not queued: apply it first, then whatever queued up meanwhile.
            _ = drainSpecialized(self, reactor, (action, sequence), .max)
        } else {
            drain(drainer, reactor: reactor)
        }
        return ActionReceipt(sequence: sequence)
    }

    /// Enqueues the work `make` builds (under the lock; nil: nothing) and drains if nobody else
    /// does. Returns false when the reactor is disposed.
    @discardableResult
    @usableFromInline func submit(reactor: R, _ make: (inout SharedState) -> Work?) -> Bool {
        ensureStarted(reactor)
        let drainer = shared.withLock { shared -> Drainer? in
            if shared.isDisposed { return nil }
            guard let work = make(&shared) else { return Drainer.none }
            shared.pending.append(work)
            if shared.isDraining { return Drainer.none }
            shared.isDraining = true
            return shared.drainPool.map { .pool($0) } ?? .caller
        }
        guard let drainer else { return false }
        drain(drainer, reactor: reactor)
        return true
    }

    /// Has `drainer` apply the queue; the calling thread holds the drainer role.
    @usableFromInline func drain(_ drainer: Drainer, reactor: R) {
        switch drainer {
        case .none:
            break
        case .caller:
            _ = drainSpecialized(self, reactor, nil, .max)
        case .pool(let pool):
            scheduleSpecialized(self, reactor, pool)
        }
    }

    // MARK: - Where actions are applied

    @usableFromInline func applyActions(on pool: any ActionExecutor, onStall: (@Sendable (Bool) -> Void)?) {
        shared.withLock { shared in
            shared.drainPool = pool
            shared.onStall = onStall
        }
    }

    @usableFromInline func setStalled(_ stalled: Bool) {
        let onStall = shared.withLock { shared -> (@Sendable (Bool) -> Void)? in
            shared.isStalled = stalled
            return shared.onStall
        }
        onStall?(stalled)
    }

    @usableFromInline var isStalled: Bool { shared.withLock { $0.isStalled } }

    // MARK: - Reading and observing

    @inlinable func currentUpdate(_ reactor: R) -> StateUpdate<R.State> {
        ensureStarted(reactor)
        return shared.withLock { $0.current! }
    }

    @usableFromInline func addObserver(
        _ reactor: R,
        receive: @escaping @Sendable (_ state: R.State, _ version: UInt64) -> Void,
        finish: (@Sendable () -> Void)? = nil
    ) -> ObservationToken {
        let id = registerObserver(reactor, receive: receive, finish: finish)
        // The token holds the shared state, not the runtime: a weak reference would give the
        // runtime a side table, and every retain of it would then take the slow path (one more
        // cache miss per action when instances are many). Once the runtime is gone the shared
        // state holds no observers, so keeping it alive is harmless.
        let shared = self.shared
        return ObservationToken { Self.removeObserver(id, from: shared) }
    }

    /// Registers an observer until it is removed by `id` or the runtime is disposed; delivers
    /// the current state to it first (see `Reactor.observe`). Returns its id.
    @usableFromInline func registerObserver(
        _ reactor: R,
        receive: @escaping @Sendable (_ state: R.State, _ version: UInt64) -> Void,
        finish: (@Sendable () -> Void)?
    ) -> UInt64 {
        ensureStarted(reactor)
        let observer = StateObserver(receive: receive, finish: finish)
        let (id, initial, pool) = shared.withLock { shared -> (UInt64, StateUpdate<R.State>?, (any ActionExecutor)?) in
            let id = shared.nextObserverID()
            if shared.isDisposed { return (id, nil, nil) }
            if shared.isDraining || !shared.pending.isEmpty {
                // The drainer delivers the state it has reached, then every later one.
                shared.waitingObservers[id] = observer
                shared.pending.append(.addObserver(id))
                return (id, nil, nil)
            }
            shared.isDraining = true
            shared.observers.append((id, observer))
            return (id, shared.current, shared.drainPool)
        }
        if let initial {
            receive(initial.state, initial.version)
            // Work queued meanwhile goes to the pool, if there is one, rather than run here.
            if !drainSpecialized(self, reactor, nil, pool == nil ? .max : 0), let pool {
                self.drain(.pool(pool), reactor: reactor)
            }
        } else if shared.withLock({ $0.isDisposed }) {
            finish?()
        }
        return id
    }

    @usableFromInline static func removeObserver(_ id: UInt64, from shared: Locked<SharedState>) {
        // The observer is handed out of the lock and let go here, after it: letting go of it can
        // run code that takes the lock again (a token its closure owned, cancelling itself).
        _ = shared.withLock { shared in
            (shared.waitingObservers.removeValue(forKey: id), take(id, from: &shared.observers))
        }
    }

    /// Takes the observer registered as `id` out of `list`, so that the caller lets go of it
    /// after the lock (see `removeObserver`).
    @usableFromInline static func take<Observer>(_ id: UInt64, from list: inout [(id: UInt64, observer: Observer)]) -> Observer? {
        guard let index = list.firstIndex(where: { $0.id == id }) else { return nil }
        return list.remove(at: index).observer
    }

    @usableFromInline func addErrorObserver(
        _ receive: @escaping @Sendable (MutationFailure) -> Void,
        finish: (@Sendable () -> Void)? = nil
    ) -> ObservationToken {
        guard let id = registerErrorObserver(receive, finish: finish) else { return ObservationToken {} }
        // Holds the shared state rather than a weak runtime, as in `addObserver`.
        let shared = self.shared
        return ObservationToken {
            // Let go of after the lock, as in `removeObserver`.
            _ = shared.withLock { Self.take(id, from: &$0.errorObservers) }
        }
    }

    /// Registers an error observer until it is removed by `id` or the runtime is disposed.
    /// Returns its id; nil, having called `finish`, when the runtime is already disposed.
    @usableFromInline func registerErrorObserver(
        _ receive: @escaping @Sendable (MutationFailure) -> Void,
        finish: (@Sendable () -> Void)?
    ) -> UInt64? {
        let id = shared.withLock { shared -> UInt64? in
            if shared.isDisposed { return nil }
            let id = shared.nextObserverID()
            shared.errorObservers.append((id, ErrorObserver(receive: receive, finish: finish)))
            return id
        }
        if id == nil { finish?() }
        return id
    }

    @usableFromInline func report(_ failure: MutationFailure) {
        let observers = shared.withLock { $0.errorObservers }
        for (_, observer) in observers { observer.receive(failure) }
    }

    // MARK: - Settling

    @usableFromInline func whenSettled(_ receipt: ActionReceipt, _ body: @escaping @Sendable () -> Void) {
        let settled = shared.withLock { shared -> Bool in
            let sequence = receipt.sequence
            if shared.isDisposed || sequence > shared.nextSequence || shared.isSettled(sequence) { return true }
            shared.settleCallbacks[sequence, default: []].append(body)
            return false
        }
        if settled { body() }
    }

    /// Calls `body` once the action has been applied (its immediate mutations reduced; what it
    /// runs later may still be going), or the reactor was disposed; at once when that is so.
    @usableFromInline func whenProcessed(_ receipt: ActionReceipt, _ body: @escaping @Sendable () -> Void) {
        let processed = shared.withLock { shared -> Bool in
            let sequence = receipt.sequence
            if shared.isDisposed || sequence > shared.nextSequence || sequence <= shared.processedThrough { return true }
            // Callers come in about the order of their sequences: the place is found from the end.
            var index = shared.processedCallbacks.count
            while index > 0 && shared.processedCallbacks[index - 1].sequence > sequence { index -= 1 }
            shared.processedCallbacks.insert((sequence, body), at: index)
            return false
        }
        if processed { body() }
    }

    // MARK: - Tasks

    /// Runs the waiting part of an action's mutations in a task owned by this runtime.
    @usableFromInline func spawn(_ mutations: Mutations<R.Mutation>, sequence: UInt64?, reactor: R) {
        let weakReactor = WeakReference(reactor)
        shared.withLock { shared in
            if shared.isDisposed { return }
            let taskID = shared.nextTaskID()
            if let sequence { shared.unsettled[sequence, default: 0] += 1 }
            let runner = AsyncMutationRunner<R.Mutation>(
                emit: { mutation in
                    guard let reactor = weakReactor.value else { return }
                    reactor.runtime.submit(reactor: reactor) { _ in
                        .mutation(mutation, sequence: sequence, task: taskID, entry: 0)
                    }
                },
                report: { error in
                    weakReactor.value?.runtime.report(MutationFailure(actionSequence: sequence, error: error))
                },
                cancel: { id in weakReactor.value?.runtime.cancelScopes(id) },
                enterScope: { id, since, cancel in weakReactor.value?.runtime.enterScope(id, since: since, cancel: cancel) },
                leaveScope: { scope in weakReactor.value?.runtime.leaveScope(scope) }
            )
            let epoch = shared.cancelEpoch
            let task = Task {
                var failure: MutationFailure?
                do {
                    try await runner.run(mutations, since: epoch)
                } catch  where !(error is CancellationError) && !Task.isCancelled {
                    failure = MutationFailure(actionSequence: sequence, error: error)
                } catch {}
                guard let reactor = weakReactor.value else { return }
                reactor.runtime.submit(reactor: reactor) { _ in .taskFinished(taskID, failure: failure) }
            }
            shared.tasks[taskID] = TaskRecord(task: task, sequence: sequence)
        }
    }

    /// Cancels every running part marked `cancellable(id:)` with `id` (see `AsyncMutationRunner`);
    /// the rest of their actions' mutations goes on.
    @usableFromInline func cancelScopes(_ id: CancelID) {
        let cancels = shared.withLock { shared in
            shared.cancelEpoch += 1
            shared.cancelledAt[id] = shared.cancelEpoch
            return shared.scopes.values.filter { $0.id == id }.map(\.cancel)
        }
        for cancel in cancels { cancel() }
    }

    /// Registers a running cancellable part; nil once the runtime is disposed, or when `id` was
    /// cancelled after the epoch `since` at which the part logically began.
    @usableFromInline func enterScope(_ id: CancelID, since: UInt64?, cancel: @escaping @Sendable () -> Void) -> UInt64? {
        shared.withLock { shared in
            if shared.isDisposed { return nil }
            if let since, let cancelled = shared.cancelledAt[id], cancelled > since { return nil }
            let scope = shared.nextTaskID()
            shared.scopes[scope] = (id, cancel)
            return scope
        }
    }

    @usableFromInline func leaveScope(_ scope: UInt64) {
        _ = shared.withLock { $0.scopes.removeValue(forKey: scope) }
    }

    /// Whether `task` is still live (not cancelled): its queued mutations are dropped otherwise.
    @usableFromInline func isLive(task: UInt64) -> Bool {
        shared.withLock { $0.tasks[task] != nil }
    }

    @usableFromInline func finishTask(_ taskID: UInt64, failure: MutationFailure?) {
        let (callbacks, settled) = shared.withLock { $0.removeTask(taskID) }
        if let failure { report(failure) }
        settled?.tell()
        for callback in callbacks { callback() }
    }

    /// Registers the settle observer (see `Reactor.observeSettlementsUntilDisposed`).
    @usableFromInline func observeSettlements(_ observer: @escaping @Sendable (_ sequence: UInt64) -> Void) {
        shared.withLock { shared in
            if !shared.isDisposed { shared.settleObserver = observer }
        }
    }

    // MARK: - Restoring

    /// Starts the reactor from a stored state instead of `initialState`: `state` (as published,
    /// after `transform(state:)`) at `version`, with the next action numbered `sequence + 1`.
    /// Returns false, changing nothing, when the reactor had already started.
    package func restore(_ reactor: R, state: R.State, version: UInt64, sequence: UInt64) -> Bool {
        start(reactor, restoring: Restored(state: state, version: version, sequence: sequence))
    }

    /// Applies mutations that belong to no action (a recovery hook's), as an action's would be,
    /// in turn with the actions: those sent after this call see their immediate part applied.
    /// What must wait counts as in flight under sequence 0, which no action has, until it finishes.
    package func apply(_ mutations: Mutations<R.Mutation>, reactor: R) {
        _ = submit(reactor: reactor) { _ in .mutations(mutations) }
    }

    /// Whether any action's mutations are still running or queued (actions sent and not yet
    /// settled); global streams merged by the transforms do not count.
    package var hasActionsInFlight: Bool {
        shared.withLock { !$0.unsettled.isEmpty || !$0.pending.isEmpty || $0.isDraining || $0.processedThrough < $0.nextSequence }
    }

    /// The highest action sequence whose `mutate` has been called. Read it only from a state
    /// observer (which runs on the thread applying actions): there it tells which actions may
    /// have contributed to the state being observed.
    package var startedThroughForObserver: UInt64 { engine?.startedThrough ?? 0 }

    /// The sequence of the action whose mutation produced the state being observed; 0 when no
    /// action did (a global stream, a recovery hook). Read it only from a state observer.
    package var producingActionForObserver: UInt64 { engine?.producingSequence ?? 0 }

    // MARK: - Dispose and stub

    @usableFromInline func dispose(_ reactor: R) {
        let released = shared.withLock { shared -> ReleasedWork? in
            if shared.isDisposed { return nil }
            return shared.shutDown()
        }
        guard let released else { return }
        released.finish()
        reactor.didDispose()
    }

    @usableFromInline var isDisposed: Bool { shared.withLock { $0.isDisposed } }

    @usableFromInline var isStubEnabled: Bool {
        get { shared.withLock { $0.isStubEnabled } }
        set { shared.withLock { $0.isStubEnabled = newValue } }
    }

    @usableFromInline var stubActions: [R.Action] { shared.withLock { $0.stubActions } }

    @usableFromInline func setStubState(_ state: R.State, reactor: R) {
        submit(reactor: reactor) { _ in .stubState(state) }
    }
}
