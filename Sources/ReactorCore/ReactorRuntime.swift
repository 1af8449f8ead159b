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
    @usableFromInline let shared = Mutex(SharedState())
    @usableFromInline let started = Atomic<Bool>(false)
    @usableFromInline let startLock = Mutex(())

    /// State only the drainer touches: set once under `startLock` before `started` is stored
    /// (release), read only after `started` was loaded (acquire); afterwards it is used only by
    /// the thread that holds the `isDraining` flag, which is taken and given back under
    /// `shared`'s lock. So no two threads ever access it at once.
    @usableFromInline nonisolated(unsafe) var engine: Engine?

    /// Creates an idle runtime; it starts on the reactor's first use.
    public init() {}

    deinit {
        let released = shared.withLock { $0.shutDown() }
        released.finish()
    }

    // MARK: - Start

    @inline(__always)
    @inlinable func ensureStarted(_ reactor: R) {
        if !started.load(ordering: .acquiring) { start(reactor) }
    }

    @usableFromInline func start(_ reactor: R) {
        startLock.withLock { _ in
            if started.load(ordering: .acquiring) { return }
            let engine = Engine(
                state: reactor.initialState,
                actionFlow: reactor.transform(action: .identity).compiled(),
                mutationFlow: reactor.transform(mutation: .identity).compiled(),
                stateFlow: reactor.transform(state: .identity).compiled()
            )
            let initial = StateUpdate(version: 0, state: engine.stateFlow.apply(engine.state) ?? engine.state)
            engine.latest = initial
            self.engine = engine
            shared.withLock { $0.current = initial }
            started.store(true, ordering: .releasing)
            startSources(of: engine, reactor: reactor)
        }
    }

    @usableFromInline func startSources(of engine: Engine, reactor: R) {
        for (entry, source) in engine.actionFlow.sources {
            startSource(source, reactor: reactor) { shared, action in
                shared.nextSequence += 1
                return .action(action, sequence: shared.nextSequence, entry: entry)
            }
        }
        for (entry, source) in engine.mutationFlow.sources {
            startSource(source, reactor: reactor) { _, mutation in
                .mutation(mutation, sequence: nil, task: nil, entry: entry)
            }
        }
        for (entry, source) in engine.stateFlow.sources {
            startSource(source, reactor: reactor) { _, state in .state(state, entry: entry) }
        }
    }

    @usableFromInline func startSource<Element>(
        _ source: FlowSource<Element>,
        reactor: R,
        work: @escaping @Sendable (inout SharedState, Element) -> Work
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
                    } catch where !(error is CancellationError) && !Task.isCancelled {
                        weakReactor.value?.runtime.report(MutationFailure(actionSequence: nil, error: error))
                    } catch {}
                },
                sequence: nil,
                cancelIDs: []
            )
        }
    }

    // MARK: - Sending

    /// The hot path: enqueue, and drain if nobody else does.
    @inlinable func send(_ action: R.Action, reactor: R) -> ActionReceipt {
        ensureStarted(reactor)
        let engine = self.engine!
        let (sequence, drainNow) = shared.withLock { shared -> (UInt64, Bool) in
            shared.nextSequence += 1
            let sequence = shared.nextSequence
            if shared.isDisposed { return (sequence, false) }
            if shared.isStubEnabled {
                shared.stubActions.append(action)
                shared.enqueueOrMarkProcessed(.skipped(sequence: sequence), sequence: sequence)
                return (sequence, false)
            }
            if shared.isDraining || !shared.pending.isEmpty {
                shared.pending.append(.action(action, sequence: sequence, entry: 0))
                return (sequence, false)
            }
            shared.isDraining = true
            // This thread is the drainer now, so it may use the engine.
            engine.observers = shared.observers
            return (sequence, true)
        }
        if drainNow {
            let drain = Drain(runtime: self, reactor: reactor, engine: engine)
            drain.applyAction(action, sequence: sequence, entry: 0)
            drain.run()
        }
        return ActionReceipt(sequence: sequence)
    }

    /// Enqueues the work `make` builds (under the lock) and drains if nobody else does.
    /// Returns false when the reactor is disposed.
    @discardableResult
    @usableFromInline func submit(reactor: R, _ make: (inout SharedState) -> Work) -> Bool {
        ensureStarted(reactor)
        let (accepted, drainNow) = shared.withLock { shared -> (Bool, Bool) in
            if shared.isDisposed { return (false, false) }
            shared.pending.append(make(&shared))
            if shared.isDraining { return (true, false) }
            shared.isDraining = true
            return (true, true)
        }
        if drainNow { Drain(runtime: self, reactor: reactor, engine: engine!).run() }
        return accepted
    }

    // MARK: - Reading and observing

    @inlinable func currentUpdate(_ reactor: R) -> StateUpdate<R.State> {
        ensureStarted(reactor)
        return shared.withLock { $0.current! }
    }

    @usableFromInline func addObserver(
        _ reactor: R,
        receive: @escaping @Sendable (StateUpdate<R.State>) -> Void,
        finish: (@Sendable () -> Void)? = nil
    ) -> ObservationToken {
        ensureStarted(reactor)
        let observer = StateObserver(receive: receive, finish: finish)
        let (id, initial) = shared.withLock { shared -> (UInt64, StateUpdate<R.State>?) in
            let id = shared.nextObserverID()
            if shared.isDisposed { return (id, nil) }
            if shared.isDraining || !shared.pending.isEmpty {
                // The drainer delivers the state it has reached, then every later one.
                shared.waitingObservers[id] = observer
                shared.pending.append(.addObserver(id))
                return (id, nil)
            }
            shared.isDraining = true
            shared.observers.append((id, observer))
            return (id, shared.current)
        }
        if let initial {
            receive(initial)
            Drain(runtime: self, reactor: reactor, engine: engine!).run()
        } else if shared.withLock({ $0.isDisposed }) {
            finish?()
        }
        return ObservationToken { [weak self] in self?.removeObserver(id) }
    }

    @usableFromInline func removeObserver(_ id: UInt64) {
        shared.withLock { shared in
            shared.waitingObservers[id] = nil
            shared.observers.removeAll { $0.id == id }
        }
    }

    @usableFromInline func addErrorObserver(
        _ receive: @escaping @Sendable (MutationFailure) -> Void,
        finish: (@Sendable () -> Void)? = nil
    ) -> ObservationToken {
        let id = shared.withLock { shared -> UInt64? in
            if shared.isDisposed { return nil }
            let id = shared.nextObserverID()
            shared.errorObservers.append((id, ErrorObserver(receive: receive, finish: finish)))
            return id
        }
        guard let id else {
            finish?()
            return ObservationToken {}
        }
        return ObservationToken { [weak self] in
            self?.shared.withLock { $0.errorObservers.removeAll { $0.id == id } }
        }
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

    // MARK: - Tasks

    /// Runs the waiting part of an action's mutations in a task owned by this runtime.
    @usableFromInline func spawn(_ mutations: Mutations<R.Mutation>, sequence: UInt64?, reactor: R) {
        let weakReactor = WeakReference(reactor)
        var cancelIDs: [CancelID] = []
        mutations.collectCancelIDs(into: &cancelIDs)
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
                cancel: { id in weakReactor.value?.runtime.cancelTasks(id) }
            )
            let task = Task {
                var failure: MutationFailure?
                do {
                    try await runner.run(mutations)
                } catch where !(error is CancellationError) && !Task.isCancelled {
                    failure = MutationFailure(actionSequence: sequence, error: error)
                } catch {}
                guard let reactor = weakReactor.value else { return }
                reactor.runtime.submit(reactor: reactor) { _ in .taskFinished(taskID, failure: failure) }
            }
            shared.tasks[taskID] = TaskRecord(task: task, sequence: sequence, cancelIDs: cancelIDs)
        }
    }

    /// Cancels every task marked with `id`; their actions settle now.
    @usableFromInline func cancelTasks(_ id: CancelID) {
        let (tasks, callbacks) = shared.withLock { shared in
            let matching = shared.tasks.filter { $0.value.cancelIDs.contains(id) }
            var callbacks: [@Sendable () -> Void] = []
            for (taskID, _) in matching {
                callbacks += shared.removeTask(taskID)
            }
            return (matching.values.map(\.task), callbacks)
        }
        for task in tasks { task.cancel() }
        for callback in callbacks { callback() }
    }

    /// Whether `task` is still live (not cancelled): its queued mutations are dropped otherwise.
    @usableFromInline func isLive(task: UInt64) -> Bool {
        shared.withLock { $0.tasks[task] != nil }
    }

    @usableFromInline func finishTask(_ taskID: UInt64, failure: MutationFailure?) {
        let callbacks = shared.withLock { $0.removeTask(taskID) }
        if let failure { report(failure) }
        for callback in callbacks { callback() }
    }

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

// MARK: - Shared (locked) state

extension ReactorRuntime {
    /// One unit of work for the drainer.
    @usableFromInline enum Work: Sendable {
        case action(R.Action, sequence: UInt64, entry: Int)
        case skipped(sequence: UInt64)
        case mutation(R.Mutation, sequence: UInt64?, task: UInt64?, entry: Int)
        case state(R.State, entry: Int)
        case stubState(R.State)
        case taskFinished(UInt64, failure: MutationFailure?)
        case addObserver(UInt64)
    }

    @usableFromInline struct StateObserver: Sendable {
        @usableFromInline let receive: @Sendable (StateUpdate<R.State>) -> Void
        @usableFromInline let finish: (@Sendable () -> Void)?
    }

    @usableFromInline struct ErrorObserver: Sendable {
        @usableFromInline let receive: @Sendable (MutationFailure) -> Void
        @usableFromInline let finish: (@Sendable () -> Void)?
    }

    @usableFromInline struct TaskRecord: Sendable {
        @usableFromInline let task: Task<Void, Never>
        @usableFromInline let sequence: UInt64?
        @usableFromInline let cancelIDs: [CancelID]
    }

    /// Everything other threads may read or change; always accessed under `shared`'s lock.
    @usableFromInline struct SharedState: Sendable {
        @usableFromInline var pending: [Work] = []
        @usableFromInline var isDraining = false
        @usableFromInline var isDisposed = false
        @usableFromInline var nextSequence: UInt64 = 0
        @usableFromInline var current: StateUpdate<R.State>?
        @usableFromInline var observers: [(id: UInt64, observer: StateObserver)] = []
        @usableFromInline var waitingObservers: [UInt64: StateObserver] = [:]
        @usableFromInline var errorObservers: [(id: UInt64, observer: ErrorObserver)] = []
        @usableFromInline var tasks: [UInt64: TaskRecord] = [:]
        /// Actions up to this sequence have had their immediate mutations applied.
        @usableFromInline var processedThrough: UInt64 = 0
        /// Waiting tasks per action sequence.
        @usableFromInline var unsettled: [UInt64: Int] = [:]
        @usableFromInline var settleCallbacks: [UInt64: [@Sendable () -> Void]] = [:]
        @usableFromInline var isStubEnabled = false
        @usableFromInline var stubActions: [R.Action] = []
        @usableFromInline var lastID: UInt64 = 0

        @usableFromInline mutating func nextObserverID() -> UInt64 { lastID += 1; return lastID }
        @usableFromInline mutating func nextTaskID() -> UInt64 { lastID += 1; return lastID }

        @inlinable func isSettled(_ sequence: UInt64) -> Bool {
            sequence <= processedThrough && unsettled[sequence] == nil
        }

        @inlinable mutating func enqueueOrMarkProcessed(_ work: Work, sequence: UInt64) {
            if isDraining || !pending.isEmpty {
                pending.append(work)
            } else {
                processedThrough = sequence
            }
        }

        /// Records that actions up to `sequence` were applied; returns callbacks now due.
        @inlinable mutating func markProcessed(through sequence: UInt64) -> [@Sendable () -> Void] {
            if sequence > processedThrough { processedThrough = sequence }
            if settleCallbacks.isEmpty { return [] }
            var due: [@Sendable () -> Void] = []
            for (waiting, callbacks) in settleCallbacks where isSettled(waiting) {
                due += callbacks
                settleCallbacks[waiting] = nil
            }
            return due
        }

        /// Forgets a task; returns the settle callbacks of its action if that is now settled.
        @usableFromInline mutating func removeTask(_ taskID: UInt64) -> [@Sendable () -> Void] {
            guard let record = tasks.removeValue(forKey: taskID), let sequence = record.sequence else { return [] }
            let remaining = (unsettled[sequence] ?? 1) - 1
            unsettled[sequence] = remaining > 0 ? remaining : nil
            guard isSettled(sequence), let callbacks = settleCallbacks.removeValue(forKey: sequence) else { return [] }
            return callbacks
        }

        /// Marks the runtime disposed and hands back everything that must be cancelled or finished.
        @usableFromInline mutating func shutDown() -> ReleasedWork {
            isDisposed = true
            pending.removeAll()
            var finishers = observers.compactMap(\.observer.finish)
            finishers += waitingObservers.values.compactMap(\.finish)
            finishers += errorObservers.compactMap(\.observer.finish)
            let released = ReleasedWork(
                tasks: tasks.values.map(\.task),
                finishers: finishers,
                callbacks: settleCallbacks.values.flatMap { $0 }
            )
            observers.removeAll()
            waitingObservers.removeAll()
            errorObservers.removeAll()
            tasks.removeAll()
            unsettled.removeAll()
            settleCallbacks.removeAll()
            return released
        }
    }

    /// What a disposed runtime must cancel, finish and call, outside the lock.
    @usableFromInline struct ReleasedWork {
        @usableFromInline let tasks: [Task<Void, Never>]
        @usableFromInline let finishers: [@Sendable () -> Void]
        @usableFromInline let callbacks: [@Sendable () -> Void]

        @usableFromInline func finish() {
            for task in tasks { task.cancel() }
            for finisher in finishers { finisher() }
            for callback in callbacks { callback() }
        }
    }
}

// MARK: - The drainer

extension ReactorRuntime {
    /// Drainer-only state, created when the runtime starts.
    @usableFromInline final class Engine {
        // `@exclusivity(unchecked)`: only the drainer touches these (see `engine`), so the
        // dynamic exclusivity checks would only cost time on the hot path.

        /// The untransformed state `reduce` works on.
        @usableFromInline @exclusivity(unchecked) var state: R.State
        /// The latest published state; `shared.current` catches up at the next `sync`.
        @usableFromInline @exclusivity(unchecked) var latest: StateUpdate<R.State>
        /// The observers as of the last `sync`.
        @usableFromInline @exclusivity(unchecked) var observers: [(id: UInt64, observer: StateObserver)] = []
        /// Whether `latest` is newer than `shared.current`.
        @usableFromInline @exclusivity(unchecked) var needsSync = false
        @usableFromInline let actionFlow: CompiledFlow<R.Action>
        @usableFromInline let mutationFlow: CompiledFlow<R.Mutation>
        @usableFromInline let stateFlow: CompiledFlow<R.State>
        /// False for the default `transform(mutation:)`: `reduce` then skips the flow entirely.
        @usableFromInline let transformsMutations: Bool
        /// False for the default `transform(state:)`.
        @usableFromInline let transformsStates: Bool
        /// The highest action sequence applied since the lock last heard of it.
        @usableFromInline @exclusivity(unchecked) var processedThrough: UInt64 = 0
        /// Reused between batches so draining does not allocate.
        @usableFromInline @exclusivity(unchecked) var batch: [Work] = []

        @usableFromInline init(
            state: R.State,
            actionFlow: CompiledFlow<R.Action>,
            mutationFlow: CompiledFlow<R.Mutation>,
            stateFlow: CompiledFlow<R.State>
        ) {
            self.state = state
            self.latest = StateUpdate(version: 0, state: state)
            self.actionFlow = actionFlow
            self.mutationFlow = mutationFlow
            self.stateFlow = stateFlow
            self.transformsMutations = !mutationFlow.steps.isEmpty
            self.transformsStates = !stateFlow.steps.isEmpty
        }
    }

    /// One drainer turn: only built by the thread that set `isDraining`.
    @usableFromInline struct Drain {
        @usableFromInline let runtime: ReactorRuntime
        @usableFromInline let reactor: R
        @usableFromInline let engine: Engine

        @usableFromInline
        init(runtime: ReactorRuntime, reactor: R, engine: Engine) {
            self.runtime = runtime
            self.reactor = reactor
            self.engine = engine
        }

        /// Applies queued work until the queue is empty, then gives up the drainer role.
        @inlinable func run() {
            var batch = engine.batch
            engine.batch = []
            while true {
                let (hasWork, due) = runtime.shared.withLock { shared -> (Bool, [@Sendable () -> Void]) in
                    let due = sync(&shared)
                    if shared.pending.isEmpty || shared.isDisposed {
                        shared.pending.removeAll(keepingCapacity: true)
                        shared.isDraining = false
                        return (false, due)
                    }
                    swap(&shared.pending, &batch)
                    return (true, due)
                }
                for callback in due { callback() }
                guard hasWork else { break }
                for index in 0..<batch.count {
                    process(batch[index])
                    // Let `currentState` readers (such as the next `mutate`) see this work's state.
                    if engine.needsSync && index + 1 < batch.count {
                        let due = runtime.shared.withLock { sync(&$0) }
                        for callback in due { callback() }
                    }
                }
                batch.removeAll(keepingCapacity: true)
            }
            engine.batch = batch
        }

        /// Publishes the drainer's progress under the lock: the latest state, the applied
        /// actions (returning the settle callbacks now due), and takes the current observers.
        @inlinable func sync(_ shared: inout SharedState) -> [@Sendable () -> Void] {
            if engine.needsSync {
                shared.current = engine.latest
                engine.needsSync = false
            }
            engine.observers = shared.observers
            return shared.markProcessed(through: engine.processedThrough)
        }

        /// transform(action:) → mutate → the immediate mutations; spawns a task for the rest.
        @inlinable func applyAction(_ action: R.Action, sequence: UInt64, entry: Int) {
            if let action = engine.actionFlow.apply(action, from: entry) {
                if case .waiting(let rest) = apply(reactor.mutate(action: action), sequence: sequence) {
                    runtime.spawn(rest, sequence: sequence, reactor: reactor)
                }
            }
            engine.processedThrough = sequence
        }

        @inlinable func process(_ work: Work) {
            switch work {
            case .action(let action, let sequence, let entry):
                applyAction(action, sequence: sequence, entry: entry)
            case .skipped(let sequence):
                engine.processedThrough = sequence
            case .mutation(let mutation, _, let task, let entry):
                if let task, !runtime.isLive(task: task) { return }
                reduce(mutation, entry: entry)
            case .state(let state, let entry):
                if let state = engine.stateFlow.apply(state, from: entry) { publish(state) }
            case .stubState(let state):
                engine.state = state
                publish(state)
            case .taskFinished(let taskID, let failure):
                runtime.finishTask(taskID, failure: failure)
            case .addObserver(let id):
                let (observer, due) = runtime.shared.withLock { shared -> (StateObserver?, [@Sendable () -> Void]) in
                    let observer = shared.waitingObservers.removeValue(forKey: id)
                    if let observer { shared.observers.append((id, observer)) }
                    return (observer, sync(&shared))
                }
                observer?.receive(engine.latest)
                for callback in due { callback() }
            }
        }

        /// What remains of an action's mutations after applying its immediate part.
        @usableFromInline enum Outcome {
            case done
            case failed
            case waiting(Mutations<R.Mutation>)
        }

        /// Applies the immediate part of `mutations` inline; returns the part that must wait.
        @inlinable func apply(_ mutations: Mutations<R.Mutation>, sequence: UInt64) -> Outcome {
            switch mutations.node {
            case .empty:
                return .done
            case .just(let mutation):
                reduce(mutation, entry: 0)
                return .done
            case .concat(let parts):
                var index = 0
                while index < parts.count {
                    switch apply(parts[index], sequence: sequence) {
                    case .done:
                        index += 1
                    case .failed:
                        return .failed
                    case .waiting(let rest):
                        let later = parts[(index + 1)...]
                        return .waiting(later.isEmpty ? rest : .concat([rest] + later))
                    }
                }
                return .done
            case .merge(let parts):
                var waiting: [Mutations<R.Mutation>] = []
                for part in parts {
                    if case .waiting(let rest) = apply(part, sequence: sequence) { waiting.append(rest) }
                }
                if waiting.isEmpty { return .done }
                return .waiting(waiting.count == 1 ? waiting[0] : .merge(waiting))
            case .fail(let error):
                runtime.report(MutationFailure(actionSequence: sequence, error: error))
                return .failed
            case .run, .delayed:
                return .waiting(mutations)
            case .cancellable(let id, let cancelInFlight, let inner):
                if cancelInFlight { runtime.cancelTasks(id) }
                let outcome = apply(inner.mutations, sequence: sequence)
                guard case .waiting(let rest) = outcome else { return outcome }
                return .waiting(Mutations(.cancellable(id, cancelInFlight: false, .init(rest))))
            case .cancel(let id):
                runtime.cancelTasks(id)
                return .done
            }
        }

        /// transform(mutation:) → reduce → transform(state:) → publish.
        @inline(__always)
        @inlinable func reduce(_ mutation: R.Mutation, entry: Int) {
            if engine.transformsMutations {
                guard let mutation = engine.mutationFlow.apply(mutation, from: entry) else { return }
                engine.state = reactor.reduce(state: engine.state, mutation: mutation)
            } else {
                engine.state = reactor.reduce(state: engine.state, mutation: mutation)
            }
            if engine.transformsStates {
                guard let visible = engine.stateFlow.apply(engine.state) else { return }
                publish(visible)
            } else {
                publish(engine.state)
            }
        }

        @inline(__always)
        @inlinable func publish(_ state: R.State) {
            let update = StateUpdate(version: engine.latest.version &+ 1, state: state)
            engine.latest = update
            engine.needsSync = true
            if engine.observers.isEmpty { return }
            for (_, observer) in engine.observers { observer.receive(update) }
        }
    }
}

/// A weak reference that can cross tasks.
final class WeakReference<Value: AnyObject & Sendable>: Sendable {
    weak let value: Value?
    init(_ value: Value) { self.value = value }
}

extension Mutations {
    /// The ids of every `cancellable` part, so a task running these mutations can be cancelled by id.
    func collectCancelIDs(into ids: inout [CancelID]) {
        switch node {
        case .cancellable(let id, _, let inner):
            ids.append(id)
            inner.mutations.collectCancelIDs(into: &ids)
        case .delayed(_, _, let inner):
            inner.mutations.collectCancelIDs(into: &ids)
        case .concat(let parts), .merge(let parts):
            for part in parts { part.collectCancelIDs(into: &ids) }
        case .empty, .just, .fail, .run, .cancel:
            break
        }
    }
}

/// Runs the waiting part of an action's mutations inside a task.
struct AsyncMutationRunner<Mutation: Sendable>: Sendable {
    let emit: @Sendable (Mutation) -> Void
    let report: @Sendable (any Error) -> Void
    let cancel: @Sendable (CancelID) -> Void

    func run(_ mutations: Mutations<Mutation>) async throws {
        switch mutations.node {
        case .empty:
            return
        case .just(let mutation):
            try Task.checkCancellation()
            emit(mutation)
        case .concat(let parts):
            for part in parts { try await run(part) }
        case .merge(let parts):
            await withTaskGroup(of: Void.self) { group in
                for part in parts {
                    group.addTask {
                        do {
                            try await run(part)
                        } catch where !(error is CancellationError) && !Task.isCancelled {
                            report(error)
                        } catch {}
                    }
                }
            }
        case .fail(let error):
            throw error
        case .run(let body):
            try await body(MutationSender(emit: emit))
        case .delayed(let duration, let clock, let inner):
            try await clock.sleep(for: duration)
            try await run(inner.mutations)
        case .cancellable(_, _, let inner):
            try await run(inner.mutations)
        case .cancel(let id):
            cancel(id)
        }
    }
}
