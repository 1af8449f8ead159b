/// Told of the session store's work as it happens, for metrics: commits, activations and
/// passivations, stored sessions that no longer decode, and reads that found the store damaged.
/// Each closure runs on the thread that did the work, so it should be cheap.
package struct StoreObserver: Sendable {
    /// A batch of `writes` was committed; the commit took `nanoseconds`.
    package var committed: @Sendable (_ writes: Int, _ nanoseconds: UInt64) -> Void
    /// A batch failed to commit: nothing of it was acknowledged.
    package var commitFailed: @Sendable () -> Void
    /// An instance was brought back from the store into memory in `nanoseconds`.
    package var activated: @Sendable (_ nanoseconds: UInt64) -> Void
    /// An instance left memory, kept by the store.
    package var passivated: @Sendable () -> Void
    /// A stored session could not be activated: it no longer decodes as its reactor type.
    package var incompatible: @Sendable () -> Void
    /// The store was counted: it holds `sessions`.
    package var counted: @Sendable (_ sessions: Int) -> Void
    /// A stored session could not be read: the store is damaged.
    package var damaged: @Sendable () -> Void
    /// The store was measured: it takes `bytes` on disk.
    package var measured: @Sendable (_ bytes: Int) -> Void
    /// With async durability, a write waited for its commit because the queue was full
    /// (``GroupCommitter/queuedAheadLimit``): the store falls behind.
    package var queueFull: @Sendable () -> Void
    /// With sync durability, a batch waits for `actions` in flight whose records it holds to
    /// settle before it is taken (``GroupCommitter/settleWindow``).
    package var awaitingSettles: @Sendable (_ actions: Int) -> Void
    /// That wait ended before the actions had all settled: `unsettled` records go into the commit.
    package var settleWaitTimedOut: @Sendable (_ unsettled: Int) -> Void
    /// An activation found an acknowledged action of the session pending, and this became of it.
    package var restoredAction: @Sendable (_ outcome: RestoredActionOutcome) -> Void

    /// An observer told what the given closures want to hear; the others ignore it.
    package init(
        committed: @escaping @Sendable (_ writes: Int, _ nanoseconds: UInt64) -> Void = { _, _ in },
        commitFailed: @escaping @Sendable () -> Void = {},
        activated: @escaping @Sendable (_ nanoseconds: UInt64) -> Void = { _ in },
        passivated: @escaping @Sendable () -> Void = {},
        incompatible: @escaping @Sendable () -> Void = {},
        counted: @escaping @Sendable (_ sessions: Int) -> Void = { _ in },
        damaged: @escaping @Sendable () -> Void = {},
        measured: @escaping @Sendable (_ bytes: Int) -> Void = { _ in },
        queueFull: @escaping @Sendable () -> Void = {},
        awaitingSettles: @escaping @Sendable (_ actions: Int) -> Void = { _ in },
        settleWaitTimedOut: @escaping @Sendable (_ unsettled: Int) -> Void = { _ in },
        restoredAction: @escaping @Sendable (_ outcome: RestoredActionOutcome) -> Void = { _ in }
    ) {
        self.committed = committed
        self.commitFailed = commitFailed
        self.activated = activated
        self.passivated = passivated
        self.incompatible = incompatible
        self.counted = counted
        self.damaged = damaged
        self.measured = measured
        self.queueFull = queueFull
        self.awaitingSettles = awaitingSettles
        self.settleWaitTimedOut = settleWaitTimedOut
        self.restoredAction = restoredAction
    }
}

/// What an activation did with an acknowledged action it found pending in the store (see
/// ``Restoration``), as the metrics count it.
package enum RestoredActionOutcome: String, Sendable, CaseIterable {
    /// It had not started: sent to the reactor again.
    case sentAgain = "sent_again"
    /// It was cut off mid-flight: handed to the reactor's recovery hook.
    case interrupted
    /// An earlier activation was running it again when the process ended again: reported, not run.
    case abandoned
    /// It no longer decodes as its type's `Action`: reported, not applied.
    case undecodable
}
