import Locking

/// A weak reference that can cross tasks.
final class WeakReference<Value: AnyObject & Sendable>: Sendable {
    weak let value: Value?
    init(_ value: Value) { self.value = value }
}

/// Runs the waiting part of an action's mutations inside a task.
///
/// A `cancellable(id:)` part runs in a child task of its own, registered under its id: cancelling
/// the id ends that part only, as `take(until:)` ends the observable it is applied to in
/// ReactorKit. A `concat` around it goes on with its next part; the other parts of a `merge` keep
/// running. Mutations a cancelled part sends after its cancellation are dropped, and the part is
/// over as it is cancelled: what encloses it does not wait for work that ignores cancellation.
struct AsyncMutationRunner<Mutation: Sendable>: Sendable {
    let emit: @Sendable (Mutation) -> Void
    let report: @Sendable (any Error) -> Void
    /// Cancels every running part marked with the id.
    let cancel: @Sendable (CancelID) -> Void
    /// Registers a running part under its id with the way to cancel it; nil when the reactor is
    /// gone, or when the id was cancelled after `since` (the cancellation epoch at which the part
    /// logically began): the part is then cancelled at once.
    let enterScope: @Sendable (CancelID, _ since: UInt64?, _ cancel: @escaping @Sendable () -> Void) -> UInt64?
    /// Unregisters a part that has finished.
    let leaveScope: @Sendable (UInt64) -> Void

    /// Runs `mutations`, which logically began at cancellation epoch `since` (when the action
    /// was applied, for the part its task starts with; nil: now). A part the task reaches only
    /// after waiting began when it was reached, so a cancellation before that does not touch it.
    /// Returns whether it waited (a delay, a `.run`).
    @discardableResult
    func run(_ mutations: Mutations<Mutation>, since epoch: UInt64?) async throws -> Bool {
        switch mutations.node {
        case .empty:
            return false
        case .just(let mutation):
            try Task.checkCancellation()
            emit(mutation)
            return false
        case .concat(let parts):
            var epoch = epoch
            var waited = false
            for part in parts where try await run(part, since: epoch) {
                waited = true
                epoch = nil
            }
            return waited
        case .merge(let parts):
            await withTaskGroup(of: Void.self) { group in
                for part in parts {
                    group.addTask {
                        do {
                            try await run(part, since: epoch)
                        } catch  where !(error is CancellationError) && !Task.isCancelled {
                            report(error)
                        } catch {}
                    }
                }
            }
            return true
        case .fail(let error):
            throw error
        case .run(let body):
            let emit = self.emit
            // A part cut off by its id may still call `send`; what it sends then is dropped.
            try await body(MutationSender { mutation in if !Task.isCancelled { emit(mutation) } })
            return true
        case .delayed(let duration, let clock, let inner):
            try await clock.sleep(for: duration)
            try await run(inner.mutations, since: nil)
            return true
        case .cancellable(let id, let cancelInFlight, let inner):
            // One that cancels its in-flight namesakes begins after that cancellation.
            if cancelInFlight { cancel(id) }
            return try await runCancellable(inner.mutations, id: id, since: cancelInFlight ? nil : epoch)
        case .cancel(let id):
            cancel(id)
            return false
        }
    }

    /// Runs `mutations` as a part that `cancel(id)` ends on its own.
    ///
    /// The part is over the moment its id cuts it off, not when its work returns: work that
    /// ignores cancellation may go on for a while, but nothing it sends is reduced any more, so
    /// what encloses the part goes on at once and an action that ends here settles then.
    private func runCancellable(_ mutations: Mutations<Mutation>, id: CancelID, since epoch: UInt64?) async throws -> Bool {
        // Registered before it starts, so nothing of a part cancelled before it began runs; a
        // cancellation that comes before the task exists is kept and applied to it.
        let part = CancellablePart()
        guard let scope = enterScope(id, epoch, { part.cutOff() }) else { return true }
        defer { leaveScope(scope) }
        // What the part sends once cut off is dropped, from whichever task it sends it.
        let emit = self.emit
        let inner = AsyncMutationRunner(
            emit: { mutation in if !part.isCutOff { emit(mutation) } },
            report: report, cancel: cancel, enterScope: enterScope, leaveScope: leaveScope
        )
        do {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let task = Task {
                        let outcome: Result<Void, any Error>
                        do {
                            _ = try await inner.run(mutations, since: epoch)
                            outcome = .success(())
                        } catch {
                            outcome = .failure(error)
                        }
                        part.finish(outcome)
                    }
                    part.wait(on: task, with: continuation)
                }
            } onCancel: {
                part.cutOff()
            }
        } catch {
            // Cut off by its id: this part is over and what encloses it goes on. Cancelled
            // with the whole action (the instance is going away): the action stops here.
            if error is CancellationError && !Task.isCancelled { return true }
            throw error
        }
        return true
    }
}

/// One running `cancellable(id:)` part: its task, and who waits for it to be over — which it is
/// when its task returns or when it is cut off (by its id, or with its whole action), whichever
/// comes first.
private final class CancellablePart: Sendable {
    private struct State {
        var task: Task<Void, Never>?
        var isCutOff = false
        /// The runner waiting for the part to be over; nil before `wait(on:with:)` and once resumed.
        var waiter: CheckedContinuation<Void, any Error>?
        /// How the task ended, when it did before `wait(on:with:)`.
        var outcome: Result<Void, any Error>?
        /// Whether the waiter was resumed (or, before `wait(on:with:)`, is to be resumed at once).
        var isOver = false
    }

    private let state = Locked(State())

    /// Whether the part was cut off; what it sends from then on is dropped.
    var isCutOff: Bool { state.withLock { $0.isCutOff } }

    /// Cuts the part off: cancels its task and has the waiter go on at once, with a
    /// `CancellationError`, without waiting for the task to return.
    func cutOff() {
        let (task, waiter) = state.withLock { state -> (Task<Void, Never>?, CheckedContinuation<Void, any Error>?) in
            if state.isCutOff { return (nil, nil) }
            state.isCutOff = true
            if state.isOver { return (state.task, nil) }
            state.isOver = true
            defer { state.waiter = nil }
            return (state.task, state.waiter)
        }
        // The task is cancelled first: what its cancellation handlers undo at once (a sleep on a
        // test clock, say) is undone before the waiter goes on.
        task?.cancel()
        waiter?.resume(throwing: CancellationError())
    }

    /// The part's task returned with `outcome`; the waiter, unless the part was cut off, goes on.
    func finish(_ outcome: Result<Void, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            if state.isOver { return nil }
            guard let waiter = state.waiter else {
                state.outcome = outcome
                return nil
            }
            state.isOver = true
            state.waiter = nil
            return waiter
        }
        waiter?.resume(with: outcome)
    }

    /// Waits with `waiter` for the part running in `task` to be over.
    func wait(on task: Task<Void, Never>, with waiter: CheckedContinuation<Void, any Error>) {
        enum Now {
            case wait, cancel
            case resume(Result<Void, any Error>)
        }
        let now = state.withLock { state -> Now in
            state.task = task
            if state.isCutOff { return .cancel }
            if let outcome = state.outcome {
                state.isOver = true
                return .resume(outcome)
            }
            state.waiter = waiter
            return .wait
        }
        switch now {
        case .wait:
            break
        case .cancel:
            task.cancel()
            waiter.resume(throwing: CancellationError())
        case .resume(let outcome):
            waiter.resume(with: outcome)
        }
    }
}
