import Locking

/// Hears, on the thread applying an instance's actions, when its runtime calls into the reactor:
/// what a host needs to trace each action (`mutate`, then each `reduce`). The calls are quick
/// and must not call back into the reactor.
@usableFromInline package protocol RuntimeProbe: AnyObject, Sendable {
    /// `mutate(action:)` is about to be called for the action `sequence` (after
    /// `transform(action:)`).
    func mutateWillBegin(sequence: UInt64)
    /// It returned the action's mutations; those available at once are reduced next.
    func mutateDidEnd(sequence: UInt64)
    /// A mutation of the action `sequence` (0: of none, such as a global stream's) is about to go
    /// through `transform(mutation:)`, `reduce` and `transform(state:)`.
    func reduceWillBegin(sequence: UInt64)
    /// It did; `version` is the state it published, nil when a transform dropped it.
    func reduceDidEnd(sequence: UInt64, published version: UInt64?)
}

/// The probe a runtime was given, boxed so that it can be set once and read without a lock.
@usableFromInline package final class RuntimeProbeBox: Sendable {
    @usableFromInline package let probe: any RuntimeProbe

    package init(_ probe: any RuntimeProbe) {
        self.probe = probe
    }
}

extension ReactorRuntime {
    /// Has `probe` hear this runtime's calls into the reactor from the next drain on. A runtime
    /// takes one probe; a later one is ignored. Returns whether `probe` was taken.
    @discardableResult
    package func setProbe(_ probe: any RuntimeProbe) -> Bool {
        let box = RuntimeProbeBox(probe)
        return probeBox.storeIfNil(box) === box
    }
}
