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
/// running. Mutations a cancelled part sends after its cancellation are dropped.
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
                        } catch where !(error is CancellationError) && !Task.isCancelled {
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
    private func runCancellable(_ mutations: Mutations<Mutation>, id: CancelID, since epoch: UInt64?) async throws -> Bool {
        // Registered before it starts, so nothing of a part cancelled before it began runs; a
        // cancellation that comes before the task exists is kept and applied to it.
        let handle = Locked<(task: Task<Void, any Error>?, cancelled: Bool)>((nil, false))
        let cancelPart: @Sendable () -> Void = {
            handle.withLock { handle -> Task<Void, any Error>? in
                handle.cancelled = true
                return handle.task
            }?.cancel()
        }
        guard let scope = enterScope(id, epoch, cancelPart) else { return true }
        defer { leaveScope(scope) }
        let part = Task { _ = try await run(mutations, since: epoch) }
        let cancelledAlready = handle.withLock { handle -> Bool in
            handle.task = part
            return handle.cancelled
        }
        if cancelledAlready { part.cancel() }
        try await withTaskCancellationHandler {
            do {
                try await part.value
            } catch {
                // Cut off by its id: this part is over and what encloses it goes on. Cancelled
                // with the whole action (the instance is going away): the action stops here.
                if error is CancellationError && !Task.isCancelled { return }
                throw error
            }
        } onCancel: {
            part.cancel()
        }
        return true
    }
}
