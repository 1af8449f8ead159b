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
