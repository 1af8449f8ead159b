import Locking
import ReactorCore
import Tracing

/// The spans of one instance's actions (swift-distributed-tracing): for each action, a span from
/// its request to its settling, with a child span for each step on the way: `decode`, `queue`
/// (accepted, waiting for its turn), `commit` (with a session store, when the answer waits for
/// the action's record to be committed), `mutate`, each `reduce` of its mutations, and
/// `first-event-write` (from a state it produced to the first event stream that wrote it).
///
/// Spans carry the instance's type and the action's sequence, never the instance's id: the id is
/// its owner's credential, and traces go to wherever the process's tracer sends them.
///
/// One per instance, made only when a tracer other than the no-op one is in use: without one,
/// nothing on an action's path touches tracing.
package final class ActionTraces: RuntimeProbe {
    private let tracer: any Tracer
    private let typeName: String
    private let state = Locked(Spans())

    /// What is open, by action sequence.
    private struct Spans {
        var actions: [UInt64: OpenAction] = [:]
        /// Versions published and not yet written to a stream, oldest first (bounded).
        var unwritten: [(version: UInt64, span: any Span)] = []
        /// The newest version a stream wrote: a stream may write a state before its `reduce`
        /// has returned (it is published inside it).
        var newestWritten: UInt64?
    }

    /// One action's span and its open step.
    private struct OpenAction {
        let span: any Span
        var step: (any Span)?
    }

    /// How many published versions may wait for a stream to write them; older ones' spans end
    /// unwritten.
    private static let unwrittenLimit = 64

    init(tracer: any Tracer, typeName: String) {
        self.tracer = tracer
        self.typeName = typeName
    }

    /// Starts an action's span, continuing the trace `carrier` names (a request's headers, read by
    /// `extractor` as the tracer reads them: `traceparent`, say), if any.
    package func startAction<Extract: Extractor>(continuing carrier: Extract.Carrier, using extractor: Extract) -> any Span {
        var context = InstrumentationContext.topLevel
        tracer.extract(carrier, into: &context, using: extractor)
        let span = tracer.startAnySpan("reactor.action", context: context, ofKind: .server)
        span.attributes["reactor.type"] = typeName
        return span
    }

    /// Runs `decode` in a `decode` span under the action's `span`.
    func decoding<Value>(under span: (any Span)?, _ decode: () throws(HostingError) -> Value) throws(HostingError) -> Value {
        guard let span else { return try decode() }
        let step = tracer.startAnySpan("decode", context: span.context, ofKind: .internal)
        defer { step.end() }
        do {
            return try decode()
        } catch {
            step.recordError(error)
            span.recordError(error)
            span.end()
            throw error
        }
    }

    /// The action `span` was accepted as `sequence`: it waits in the queue. Called under the
    /// runtime's lock, before anything can apply the action.
    func accepted(_ span: any Span, sequence: UInt64) {
        span.attributes["reactor.action.seq"] = Int64(bitPattern: sequence)
        let queue = child("queue", of: span, sequence: sequence)
        state.withLock { $0.actions[sequence] = OpenAction(span: span, step: queue) }
    }

    /// The answer to action `sequence` waits for its record's commit (`ticket`): a `commit` span
    /// under its `span`, which ends (with an error, unless committed) once the store has the record.
    func committing(_ span: any Span, sequence: UInt64, ticket: CommitTicket) {
        let commit = child("commit", of: span, sequence: sequence)
        ticket.whenCommitted { outcome in
            if outcome != .committed { commit.recordError(UncommittedAction(outcome: outcome)) }
            commit.end()
        }
    }

    /// The action `sequence` settled: every mutation of it was reduced. Its span ends.
    func settled(sequence: UInt64) {
        let open = state.withLock { $0.actions.removeValue(forKey: sequence) }
        open?.step?.end()
        open?.span.end()
    }

    /// Ends every open span (the instance is gone).
    func endAll() {
        let spans = state.withLock { state in
            defer { state = Spans() }
            return state.actions.values.flatMap { [$0.step, $0.span].compactMap { $0 } } + state.unwritten.map(\.span)
        }
        for span in spans { span.end() }
    }

    /// An event stream wrote the state `version`: the `first-event-write` spans of it and of the
    /// versions before it end.
    package func wrote(version: UInt64) {
        let written = state.withLock { state -> [any Span] in
            state.newestWritten = max(state.newestWritten ?? 0, version)
            guard let first = state.unwritten.first, first.version <= version else { return [] }
            let count = state.unwritten.firstIndex { $0.version > version } ?? state.unwritten.count
            defer { state.unwritten.removeFirst(count) }
            return state.unwritten.prefix(count).map(\.span)
        }
        for span in written { span.end() }
    }

    // MARK: RuntimeProbe

    package func mutateWillBegin(sequence: UInt64) {
        beginStep("mutate", sequence: sequence)
    }

    package func mutateDidEnd(sequence: UInt64) {
        endStep(sequence: sequence)
    }

    package func reduceWillBegin(sequence: UInt64) {
        beginStep("reduce", sequence: sequence)
    }

    package func reduceDidEnd(sequence: UInt64, published version: UInt64?) {
        let (step, span) = state.withLock { state -> ((any Span)?, (any Span)?) in
            guard var open = state.actions[sequence] else { return (nil, nil) }
            defer {
                open.step = nil
                state.actions[sequence] = open
            }
            return (open.step, open.span)
        }
        if let version { step?.attributes["reactor.version"] = Int64(bitPattern: version) }
        step?.end()
        guard let version, let span else { return }
        let write = child("first-event-write", of: span, sequence: sequence)
        write.attributes["reactor.version"] = Int64(bitPattern: version)
        let (alreadyWritten, unwritten) = state.withLock { state -> (Bool, [any Span]) in
            if let written = state.newestWritten, written >= version { return (true, []) }
            state.unwritten.append((version, write))
            let excess = state.unwritten.count - Self.unwrittenLimit
            guard excess > 0 else { return (false, []) }
            defer { state.unwritten.removeFirst(excess) }
            return (false, state.unwritten.prefix(excess).map(\.span))
        }
        if alreadyWritten { write.end() }
        for span in unwritten {
            span.attributes["reactor.written"] = false
            span.end()
        }
    }

    // MARK: Steps

    private func child(_ name: String, of span: any Span, sequence: UInt64) -> any Span {
        let step = tracer.startAnySpan(name, context: span.context, ofKind: .internal)
        step.attributes["reactor.type"] = typeName
        step.attributes["reactor.action.seq"] = Int64(bitPattern: sequence)
        return step
    }

    /// Ends the action's open step (its wait in the queue) and starts `name` in its place.
    private func beginStep(_ name: String, sequence: UInt64) {
        guard let span = state.withLock({ $0.actions[sequence]?.span }) else { return }
        let step = child(name, of: span, sequence: sequence)
        let previous = state.withLock { state -> (any Span)? in
            guard var open = state.actions[sequence] else { return nil }
            defer {
                open.step = step
                state.actions[sequence] = open
            }
            return open.step
        }
        previous?.end()
    }

    private func endStep(sequence: UInt64) {
        let step = state.withLock { state -> (any Span)? in
            guard var open = state.actions[sequence] else { return nil }
            defer {
                open.step = nil
                state.actions[sequence] = open
            }
            return open.step
        }
        step?.end()
    }
}

/// Why an action's record was not committed, as its `commit` span records it.
struct UncommittedAction: Error, CustomStringConvertible {
    let outcome: CommitOutcome

    var description: String {
        outcome == .overtaken ? "another node took the session over" : "the session store failed to commit it"
    }
}
