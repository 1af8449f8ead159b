import Locking

extension ReactorRuntime {
    /// Drainer-only state, created when the runtime starts.
    @usableFromInline final class Engine {
        // `@exclusivity(unchecked)`: only the drainer touches these (see `engine`), so the
        // dynamic exclusivity checks would only cost time on the hot path. Stored in this
        // order so that what every action uses shares as few cache lines as possible.

        /// Whether `latest` is newer than `shared.current`.
        @usableFromInline @exclusivity(unchecked) var needsSync = false
        /// False for the default `transform(mutation:)`: `reduce` then skips the flow entirely.
        @usableFromInline let transformsMutations: Bool
        /// False for the default `transform(state:)`.
        @usableFromInline let transformsStates: Bool
        /// The highest action sequence applied since the lock last heard of it.
        @usableFromInline @exclusivity(unchecked) var processedThrough: UInt64 = 0
        /// The highest action sequence whose `mutate` has been called: every state published
        /// from now on may carry effects of actions up to it, and of none after it.
        @usableFromInline @exclusivity(unchecked) var startedThrough: UInt64 = 0
        /// The sequence of the action whose mutation is being reduced; 0 for a mutation of no
        /// action (a global stream's, a recovery hook's).
        @usableFromInline @exclusivity(unchecked) var producingSequence: UInt64 = 0
        /// The observers as of the last `sync`; none once a drain is done.
        @usableFromInline @exclusivity(unchecked) var observers: [(id: UInt64, observer: StateObserver)] = []
        /// The work being applied, when a batch holds more than one item; reused between
        /// batches so draining does not allocate.
        @usableFromInline @exclusivity(unchecked) var batch: [Work] = []
        @usableFromInline let actionFlow: CompiledFlow<R.Action>
        /// The latest published state; `shared.current` catches up at the next `sync`.
        @usableFromInline @exclusivity(unchecked) var latest: StateUpdate<R.State>
        /// The untransformed state `reduce` works on.
        @usableFromInline @exclusivity(unchecked) var state: R.State
        @usableFromInline let mutationFlow: CompiledFlow<R.Mutation>
        @usableFromInline let stateFlow: CompiledFlow<R.State>

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

    /// A turn on an ``ActionExecutor``: applies about `workPerTurn` items of work (the batch that
    /// reaches it is finished), then queues itself again if work is left, so reactors with long
    /// queues take turns with the others, and the pool's watchdog sees a new turn start while a
    /// busy reactor makes progress: a turn's length follows the work it does, not how much was
    /// queued.
    @usableFromInline final class PooledTurn: ExecutorTurn {
        @usableFromInline let runtime: ReactorRuntime
        @usableFromInline let reactor: R
        @usableFromInline let pool: any ActionExecutor

        @usableFromInline init(runtime: ReactorRuntime, reactor: R, pool: any ActionExecutor) {
            self.runtime = runtime
            self.reactor = reactor
            self.pool = pool
        }

        @usableFromInline static var workPerTurn: Int { 1_024 }

        @usableFromInline func run() {
            // The turn is queued only by the thread holding the drainer role, so it holds it now.
            if !runtime.drainSpecialized(runtime, reactor, nil, Self.workPerTurn) { pool.schedule(self) }
        }

        @usableFromInline func setStalled(_ stalled: Bool) { runtime.setStalled(stalled) }
    }

    /// One drainer turn: only built by the thread that set `isDraining`.
    @usableFromInline struct Drain {
        @usableFromInline let runtime: ReactorRuntime
        @usableFromInline let reactor: R
        @usableFromInline let engine: Engine
        /// Read once per turn: one load for every action and mutation the turn applies.
        @usableFromInline let probe: (any RuntimeProbe)?

        @usableFromInline
        init(runtime: ReactorRuntime, reactor: R, engine: Engine) {
            self.runtime = runtime
            self.reactor = reactor
            self.engine = engine
            self.probe = runtime.probeBox.load()?.probe
        }

        /// Applies queued work until the queue is empty, then gives up the drainer role.
        /// With a `workLimit`, stops once it has applied that many items of work (finishing the
        /// batch that reaches it) when work is left, keeping the role.
        /// - Returns: whether the role was given up.
        @inlinable @discardableResult func run(workLimit: Int = .max) -> Bool {
            var applied = 0
            while true {
                let (step, synced) = runtime.shared.withLock { shared -> (Step, Synced) in
                    let finished = shared.pending.isEmpty || shared.isDisposed
                    // A drainer that is done lets go of its copy of the observers: a cancelled
                    // observer must not be kept alive until the next action.
                    let synced = sync(&shared, keepingObservers: !finished)
                    if finished {
                        shared.pending.removeAll(keepingCapacity: true)
                        shared.isDraining = false
                        return (.done, synced)
                    }
                    if applied >= workLimit { return (.yield, synced) }
                    // One item (the usual case when actions are spread over many instances) is
                    // taken out on its own, leaving the batch buffer untouched: it is one more
                    // cold allocation per action when the instance has not run for a while.
                    if shared.pending.count == 1 { return (.applyOne(shared.pending.removeLast()), synced) }
                    // `engine.batch` is empty here; the queue's buffer becomes the batch and the
                    // batch's (with its capacity) the queue.
                    swap(&shared.pending, &engine.batch)
                    return (.apply, synced)
                }
                synced.runCallbacks()
                switch step {
                case .done: return true
                case .yield: return false
                case .applyOne(let work):
                    applied += 1
                    process(work)
                case .apply:
                    applied += engine.batch.count
                    applyBatch()
                }
            }
        }

        @usableFromInline enum Step {
            case apply
            case applyOne(Work)
            case yield
            case done
        }

        /// Applies `engine.batch` in order and empties it, keeping its capacity.
        @inlinable func applyBatch() {
            let count = engine.batch.count
            for index in 0..<count {
                process(engine.batch[index])
                // Let `currentState` readers (such as the next `mutate`) see this work's state.
                if engine.needsSync && index + 1 < count {
                    runtime.shared.withLock { sync(&$0) }.runCallbacks()
                }
            }
            engine.batch.removeAll(keepingCapacity: true)
        }

        /// Publishes the drainer's progress under the lock: the latest state and the applied
        /// actions (handing back the settle callbacks now due); takes the current observers, or
        /// none when `keepingObservers` is false, handing back the ones it held.
        @inlinable func sync(_ shared: inout SharedState, keepingObservers: Bool = true) -> Synced {
            if engine.needsSync {
                shared.current = engine.latest
                engine.needsSync = false
            }
            var observers = keepingObservers ? shared.observers : []
            swap(&observers, &engine.observers)
            let previous = shared.processedThrough
            let due = shared.markProcessed(through: engine.processedThrough)
            return Synced(due: due, settled: shared.settledSince(previous), formerObservers: observers)
        }

        /// What `sync` hands back, to be used once the lock is released.
        @usableFromInline struct Synced {
            /// Settle callbacks now due.
            @usableFromInline let due: [@Sendable () -> Void]
            /// The actions that settled, for the settle observer.
            @usableFromInline let settled: SettledActions?
            /// The observers the engine held before. Released with this value, after the lock:
            /// letting go of an observer can run code that takes the lock (a token its closure
            /// owned, cancelling itself).
            @usableFromInline let formerObservers: [(id: UInt64, observer: StateObserver)]

            @inlinable init(
                due: [@Sendable () -> Void], settled: SettledActions?, formerObservers: [(id: UInt64, observer: StateObserver)]
            ) {
                self.due = due
                self.settled = settled
                self.formerObservers = formerObservers
            }

            /// Tells the settle observer, then runs the settle callbacks: a host that records
            /// settled actions has, when a callback runs, heard of its action.
            @inlinable func runCallbacks() {
                settled?.tell()
                for callback in due { callback() }
            }
        }

        @inlinable func process(_ work: Work) {
            switch work {
            case .action(let action, let sequence, let entry):
                applyAction(action, sequence: sequence, entry: entry)
            case .skipped(let sequence):
                engine.processedThrough = sequence
            case .mutation(let mutation, let sequence, let task, let entry):
                if let task, !runtime.isLive(task: task) { return }
                engine.producingSequence = sequence ?? 0
                reduce(mutation, entry: entry)
            case .state(let state, let entry):
                engine.producingSequence = 0
                if let state = engine.stateFlow.apply(state, from: entry) { publish(state) }
            case .stubState(let state):
                engine.producingSequence = 0
                engine.state = state
                publish(state)
            case .taskFinished(let taskID, let failure):
                runtime.finishTask(taskID, failure: failure)
            case .mutations(let mutations):
                engine.producingSequence = 0
                if case .waiting(let rest) = apply(mutations, sequence: 0) {
                    runtime.spawn(rest, sequence: 0, reactor: reactor)
                }
            case .addObserver(let id):
                let (observer, synced) = runtime.shared.withLock { shared -> (StateObserver?, Synced) in
                    let observer = shared.waitingObservers.removeValue(forKey: id)
                    if let observer { shared.observers.append((id, observer)) }
                    return (observer, sync(&shared))
                }
                if let observer { observer.receive(engine.latest.state, engine.latest.version) }
                synced.runCallbacks()
            }
        }
    }
}
