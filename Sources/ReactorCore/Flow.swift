/// A declarative description of how a reactor transforms one of its streams (actions,
/// mutations or states), built in the `transform` hooks.
///
/// The runtime calls each `transform` hook once, when the reactor starts, with ``identity`` and
/// keeps what it returns. Per-element steps (``map(_:)``, ``compactMap(_:)``, ``filter(_:)``,
/// ``handleEvents(_:)``) then run synchronously on every element, in order; the default hook
/// returns its input, which costs nothing per element.
///
/// ``merge(with:)`` adds a second source: each merged sequence gets one long-lived task per
/// reactor instance (cancelled when the instance is disposed), and its elements enter the
/// reactor's queue and then pass through the steps written *after* the merge.
///
/// ## Global state
///
/// To let one instance's action update every instance, keep a process-wide store that hands
/// each instance its own `AsyncSequence` of mutations, and merge it in `transform(mutation:)`:
///
/// ```swift
/// func transform(mutation: Flow<Mutation>) -> Flow<Mutation> {
///     mutation.merge(with: room.events().map { Mutation.roomChanged($0) })
/// }
/// ```
///
/// The store's elements are reduced like any other mutation, serially with this instance's own.
public struct Flow<Element: Sendable>: Sendable {
    enum Stage: Sendable {
        case step(@Sendable (Element) -> Element?)
        case source(FlowSource<Element>)
    }

    let stages: [Stage]

    init(stages: [Stage]) { self.stages = stages }

    /// The untouched stream: what every `transform` hook receives.
    public static var identity: Flow { Flow(stages: []) }

    private func appending(_ stage: Stage) -> Flow { Flow(stages: stages + [stage]) }

    /// Replaces each element with `transform(element)`.
    public func map(_ transform: @escaping @Sendable (Element) -> Element) -> Flow {
        appending(.step { transform($0) })
    }

    /// Replaces each element with `transform(element)`, dropping it when that is `nil`.
    public func compactMap(_ transform: @escaping @Sendable (Element) -> Element?) -> Flow {
        appending(.step(transform))
    }

    /// Keeps only the elements for which `isIncluded` is true.
    public func filter(_ isIncluded: @escaping @Sendable (Element) -> Bool) -> Flow {
        appending(.step { isIncluded($0) ? $0 : nil })
    }

    /// Calls `receive` with each element (for logging, metrics…) and passes it on unchanged.
    public func handleEvents(_ receive: @escaping @Sendable (Element) -> Void) -> Flow {
        appending(
            .step {
                receive($0)
                return $0
            })
    }

    /// Adds the elements of `other` to the stream. See "Global state" above.
    ///
    /// An error thrown by `other` ends that source and is reported as a ``MutationFailure``
    /// without an action sequence.
    public func merge<Other: AsyncSequence & Sendable>(with other: Other) -> Flow where Other.Element == Element {
        appending(
            .source(
                FlowSource { deliver in
                    for try await element in other {
                        if !deliver(element) { return }
                    }
                }))
    }

    /// The form the runtime executes: steps in order, and the sources with where they enter.
    func compiled() -> CompiledFlow<Element> {
        var steps: [@Sendable (Element) -> Element?] = []
        var sources: [(entry: Int, source: FlowSource<Element>)] = []
        for stage in stages {
            switch stage {
            case .step(let step): steps.append(step)
            case .source(let source): sources.append((steps.count, source))
            }
        }
        return CompiledFlow(steps: steps, sources: sources)
    }
}

/// A merged source: runs until it ends, it throws, or `deliver` returns false (reactor gone).
@usableFromInline struct FlowSource<Element: Sendable>: Sendable {
    @usableFromInline let run: @Sendable (_ deliver: @Sendable (Element) -> Bool) async throws -> Void
}

/// A ``Flow`` ready to run: the per-element steps and the merged sources.
@usableFromInline struct CompiledFlow<Element: Sendable>: Sendable {
    @usableFromInline let steps: [@Sendable (Element) -> Element?]
    @usableFromInline let sources: [(entry: Int, source: FlowSource<Element>)]

    static var identity: CompiledFlow { CompiledFlow(steps: [], sources: []) }

    /// Runs `element` through the steps from index `entry` on; `nil` when a step dropped it.
    @inlinable
    func apply(_ element: Element, from entry: Int = 0) -> Element? {
        if entry >= steps.count { return element }
        var current = element
        for index in entry..<steps.count {
            guard let next = steps[index](current) else { return nil }
            current = next
        }
        return current
    }
}
