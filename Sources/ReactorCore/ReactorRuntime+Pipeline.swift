// The pipeline of one reactor instance, top to bottom in ReactorKit's order (its
// `createReactorStreams`):
//
//   action → transform(action:) → mutate(action:) → transform(mutation:) → reduce(state:mutation:)
//          → transform(state:) → publish (currentState, observers)
//
// `applyAction` takes an action through the first two steps and reduces the mutations that are
// there at once (`apply`); the part of them that must wait (a delay, a `.run`) becomes a task
// whose mutations come back through the queue, so mutations of several actions interleave.
// Every mutation then goes through `reduce`: transform(mutation:), reduce, transform(state:),
// `publish`. Only the thread holding the drainer role runs these (see `ReactorRuntime`), one
// work item at a time, so `reduce` is serial and the state needs no lock.
//
// Around it, `ReactorRuntime` (sending, observing, tasks) and `ReactorRuntime+Drain` (the queue
// and the drainer role) do the plumbing. Three closures built in `ReactorRuntime.init` reach this
// code compiled for the concrete reactor type; they change how it is called, not what it does.

extension ReactorRuntime.Drain {
    /// transform(action:) → mutate → the immediate mutations; spawns a task for the rest.
    @inlinable func applyAction(_ action: R.Action, sequence: UInt64, entry: Int) {
        engine.startedThrough = sequence
        engine.producingSequence = sequence
        if let action = engine.actionFlow.apply(action, from: entry) {
            let mutations: Mutations<R.Mutation>
            if let probe {
                probe.mutateWillBegin(sequence: sequence)
                mutations = reactor.mutate(action: action)
                probe.mutateDidEnd(sequence: sequence)
            } else {
                mutations = reactor.mutate(action: action)
            }
            if case .waiting(let rest) = apply(mutations, sequence: sequence) {
                runtime.spawn(rest, sequence: sequence, reactor: reactor)
            }
        }
        engine.processedThrough = sequence
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
            if cancelInFlight { runtime.cancelScopes(id) }
            let outcome = apply(inner.mutations, sequence: sequence)
            guard case .waiting(let rest) = outcome else { return outcome }
            return .waiting(Mutations(.cancellable(id, cancelInFlight: false, .init(rest))))
        case .cancel(let id):
            runtime.cancelScopes(id)
            return .done
        }
    }

    /// transform(mutation:) → reduce → transform(state:) → publish; told to the probe, if any.
    @inline(__always)
    @inlinable func reduce(_ mutation: R.Mutation, entry: Int) {
        guard let probe else { return reduceUnprobed(mutation, entry: entry) }
        let sequence = engine.producingSequence
        let before = engine.latest.version
        probe.reduceWillBegin(sequence: sequence)
        reduceUnprobed(mutation, entry: entry)
        let after = engine.latest.version
        probe.reduceDidEnd(sequence: sequence, published: after != before ? after : nil)
    }

    /// transform(mutation:) → reduce → transform(state:) → publish.
    @inline(__always)
    @inlinable func reduceUnprobed(_ mutation: R.Mutation, entry: Int) {
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
        let version = engine.latest.version &+ 1
        engine.latest = StateUpdate(version: version, state: state)
        engine.needsSync = true
        if engine.observers.isEmpty { return }
        for (_, observer) in engine.observers { observer.receive(state, version) }
    }
}
