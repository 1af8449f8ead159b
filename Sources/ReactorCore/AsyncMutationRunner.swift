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
    /// gone (the part is then cancelled at once).
    let enterScope: @Sendable (CancelID, _ cancel: @escaping @Sendable () -> Void) -> UInt64?
    /// Unregisters a part that has finished.
    let leaveScope: @Sendable (UInt64) -> Void

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
            let emit = self.emit
            // A part cut off by its id may still call `send`; what it sends then is dropped.
            try await body(MutationSender { mutation in if !Task.isCancelled { emit(mutation) } })
        case .delayed(let duration, let clock, let inner):
            try await clock.sleep(for: duration)
            try await run(inner.mutations)
        case .cancellable(let id, let cancelInFlight, let inner):
            if cancelInFlight { cancel(id) }
            try await runCancellable(inner.mutations, id: id)
        case .cancel(let id):
            cancel(id)
        }
    }

    /// Runs `mutations` as a part that `cancel(id)` ends on its own.
    private func runCancellable(_ mutations: Mutations<Mutation>, id: CancelID) async throws {
        let part = Task { try await run(mutations) }
        guard let scope = enterScope(id, { part.cancel() }) else {
            part.cancel()
            return
        }
        defer { leaveScope(scope) }
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
    }
}
