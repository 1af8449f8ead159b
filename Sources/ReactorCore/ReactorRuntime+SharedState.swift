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
        /// Mutations that belong to no action (a recovery hook's), applied in turn with the
        /// actions as an action's are: the immediate part at once, the rest in a task.
        case mutations(Mutations<R.Mutation>)
    }

    @usableFromInline struct StateObserver: Sendable {
        /// Takes the state and its version apart rather than as a `StateUpdate`: an observer
        /// compiled generic over the reactor would otherwise look up `StateUpdate<State>`'s type
        /// at run time for every state it receives.
        @usableFromInline let receive: @Sendable (_ state: R.State, _ version: UInt64) -> Void
        @usableFromInline let finish: (@Sendable () -> Void)?
    }

    @usableFromInline struct ErrorObserver: Sendable {
        @usableFromInline let receive: @Sendable (MutationFailure) -> Void
        @usableFromInline let finish: (@Sendable () -> Void)?
    }

    @usableFromInline struct TaskRecord: Sendable {
        @usableFromInline let task: Task<Void, Never>
        @usableFromInline let sequence: UInt64?
    }

    /// Everything other threads may read or change; always accessed under `shared`'s lock.
    ///
    /// The fields every action reads or writes come first, next to the lock's mutex (see
    /// `LockedStorage`), so that with many cold instances an action misses the cache on as few
    /// lines of this state as possible; the rest follow.
    @usableFromInline struct SharedState: Sendable {
        @usableFromInline var pending: [Work] = []
        /// Where queued work is applied; `nil`: by the thread that finds the reactor idle.
        @usableFromInline var drainPool: (any ActionExecutor)?
        @usableFromInline var nextSequence: UInt64 = 0
        /// Actions up to this sequence have had their immediate mutations applied.
        @usableFromInline var processedThrough: UInt64 = 0
        @usableFromInline var isDraining = false
        @usableFromInline var isDisposed = false
        @usableFromInline var isStubEnabled = false
        /// Whether a turn on `drainPool` has run past the pool's stall timeout.
        @usableFromInline var isStalled = false
        @usableFromInline var observers: [(id: UInt64, observer: StateObserver)] = []
        @usableFromInline var settleCallbacks: [UInt64: [@Sendable () -> Void]] = [:]
        /// Callbacks waiting for an action to be applied (see `ReactorRuntime.whenProcessed`),
        /// in ascending order of their sequence. Next to `settleCallbacks`: every action's
        /// `markProcessed` reads both, from one cache line.
        @usableFromInline var processedCallbacks: [(sequence: UInt64, body: @Sendable () -> Void)] = []
        /// Told of every action that settles (see `Reactor.observeSettlementsUntilDisposed`); read
        /// by every action's sync, after the two above.
        @usableFromInline var settleObserver: (@Sendable (_ sequence: UInt64) -> Void)?
        @usableFromInline var current: StateUpdate<R.State>?
        @usableFromInline var waitingObservers: [UInt64: StateObserver] = [:]
        @usableFromInline var errorObservers: [(id: UInt64, observer: ErrorObserver)] = []
        @usableFromInline var tasks: [UInt64: TaskRecord] = [:]
        /// The running `cancellable(id:)` parts, by scope number, with how to cancel each.
        @usableFromInline var scopes: [UInt64: (id: CancelID, cancel: @Sendable () -> Void)] = [:]
        /// Counts cancellations by id; with `cancelledAt`, it lets a part that had not started
        /// when its id was cancelled be cancelled as it starts.
        @usableFromInline var cancelEpoch: UInt64 = 0
        /// The epoch of each id's last cancellation.
        @usableFromInline var cancelledAt: [CancelID: UInt64] = [:]
        /// Waiting tasks per action sequence.
        @usableFromInline var unsettled: [UInt64: Int] = [:]
        @usableFromInline var stubActions: [R.Action] = []
        @usableFromInline var lastID: UInt64 = 0
        @usableFromInline var onStall: (@Sendable (Bool) -> Void)?

        @usableFromInline mutating func nextObserverID() -> UInt64 {
            lastID += 1
            return lastID
        }
        @usableFromInline mutating func nextTaskID() -> UInt64 {
            lastID += 1
            return lastID
        }

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
        ///
        /// Only the actions applied since the last call can have settled here: one applied before
        /// and still waiting then waits for a task, and settles in ``removeTask(_:)``. So the
        /// cost follows the actions just applied, not the callbacks waiting (a queue of
        /// acknowledged actions a hot instance has not reached yet would otherwise make every
        /// action walk all of theirs).
        @inlinable mutating func markProcessed(through sequence: UInt64) -> [@Sendable () -> Void] {
            let previous = processedThrough
            guard sequence > previous else { return [] }
            processedThrough = sequence
            var due: [@Sendable () -> Void] = []
            if !processedCallbacks.isEmpty {
                var count = 0
                while count < processedCallbacks.count && processedCallbacks[count].sequence <= sequence {
                    due.append(processedCallbacks[count].body)
                    count += 1
                }
                processedCallbacks.removeFirst(count)
            }
            if settleCallbacks.isEmpty { return due }
            if sequence - previous <= UInt64(settleCallbacks.count) {
                for waiting in (previous + 1)...sequence where isSettled(waiting) {
                    if let callbacks = settleCallbacks.removeValue(forKey: waiting) { due += callbacks }
                }
            } else {
                let settled = settleCallbacks.keys.filter { $0 > previous && isSettled($0) }
                for waiting in settled {
                    if let callbacks = settleCallbacks.removeValue(forKey: waiting) { due += callbacks }
                }
            }
            return due
        }

        /// The actions of `previous + 1 ... processedThrough` that settled as they were applied,
        /// for the settle observer, if there is one: called once `processedThrough` has moved
        /// past `previous`. The rest settle later, in ``removeTask(_:)``.
        @inlinable func settledSince(_ previous: UInt64) -> SettledActions? {
            guard let settleObserver, processedThrough > previous else { return nil }
            return SettledActions(observer: settleObserver, sequences: (previous + 1)...processedThrough, waiting: unsettled)
        }

        /// Forgets a task; returns the settle callbacks of its action if that is now settled, and
        /// the action for the settle observer.
        @usableFromInline mutating func removeTask(_ taskID: UInt64) -> (callbacks: [@Sendable () -> Void], settled: SettledActions?) {
            guard let record = tasks.removeValue(forKey: taskID), let sequence = record.sequence else { return ([], nil) }
            let remaining = (unsettled[sequence] ?? 1) - 1
            unsettled[sequence] = remaining > 0 ? remaining : nil
            guard isSettled(sequence) else { return ([], nil) }
            let settled = settleObserver.map { SettledActions(observer: $0, sequences: sequence...sequence, waiting: [:]) }
            return (settleCallbacks.removeValue(forKey: sequence) ?? [], settled)
        }

        /// Marks the runtime disposed and hands back everything that must be cancelled or finished,
        /// and everything it held.
        @usableFromInline mutating func shutDown() -> ReleasedWork {
            isDisposed = true
            let formerState = self
            pending.removeAll()
            var finishers = observers.compactMap(\.observer.finish)
            finishers += waitingObservers.values.compactMap(\.finish)
            finishers += errorObservers.compactMap(\.observer.finish)
            let released = ReleasedWork(
                tasks: tasks.values.map(\.task),
                finishers: finishers,
                callbacks: settleCallbacks.values.flatMap { $0 } + processedCallbacks.map(\.body),
                formerState: formerState
            )
            observers.removeAll()
            waitingObservers.removeAll()
            errorObservers.removeAll()
            tasks.removeAll()
            scopes.removeAll()
            unsettled.removeAll()
            settleCallbacks.removeAll()
            settleObserver = nil
            processedCallbacks.removeAll()
            return released
        }
    }

    /// Actions that settled, for the settle observer: handed out of the lock, told there.
    @usableFromInline struct SettledActions: Sendable {
        @usableFromInline let observer: @Sendable (_ sequence: UInt64) -> Void
        @usableFromInline let sequences: ClosedRange<UInt64>
        /// The actions still waiting for a task when `sequences` were applied (a copy of
        /// `SharedState.unsettled`, shared until either changes): they settle later.
        @usableFromInline let waiting: [UInt64: Int]

        @inlinable init(observer: @escaping @Sendable (_ sequence: UInt64) -> Void, sequences: ClosedRange<UInt64>, waiting: [UInt64: Int])
        {
            self.observer = observer
            self.sequences = sequences
            self.waiting = waiting
        }

        /// Tells the observer of each settled action, in order.
        @inlinable func tell() {
            if waiting.isEmpty {
                for sequence in sequences { observer(sequence) }
            } else {
                for sequence in sequences where waiting[sequence] == nil { observer(sequence) }
            }
        }
    }

    /// What a disposed runtime must cancel, finish and call, outside the lock.
    @usableFromInline struct ReleasedWork {
        @usableFromInline let tasks: [Task<Void, Never>]
        @usableFromInline let finishers: [@Sendable () -> Void]
        @usableFromInline let callbacks: [@Sendable () -> Void]
        /// The observers, queued work and tasks the runtime held, let go of with this value,
        /// after the lock: letting go of them can run code that takes the lock again.
        @usableFromInline let formerState: SharedState

        @usableFromInline func finish() {
            for task in tasks { task.cancel() }
            for finisher in finishers { finisher() }
            for callback in callbacks { callback() }
        }
    }
}
