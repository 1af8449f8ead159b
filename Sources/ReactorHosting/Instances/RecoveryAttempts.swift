import Dispatch
import Locking

/// Counts, in the store, each restart that begins to run a session's pending actions again,
/// before any of them runs: an action whose running ends the process (a trap in `reduce` or in
/// the recovery hook, which no process survives) would otherwise be run again by every
/// activation of its session, ending the process each time.
///
/// An action still pending after ``limit`` such attempts is abandoned: reported (logged and an
/// `error` event) and never run again (see ``Restoration/abandoned``).
enum RecoveryAttempts {
    /// How many restarts may begin to run a pending action again.
    static let limit = 1

    /// How long an activation waits for the count's commit before it gives up.
    static let commitTimeout: DispatchTimeInterval = .seconds(10)

    /// Whether the record of `pending` is run again (sent again or handed to the recovery hook)
    /// by this activation, rather than abandoned. `countedHere`: the session's actions whose
    /// attempt this process counted (see ``AttemptLedger``), which did not end it.
    static func runsAgain(_ pending: PendingAction, countedHere: Set<UInt64>) -> Bool {
        pending.attempts < limit || isCountedAlready(pending, countedHere: countedHere)
    }

    /// Whether the attempt `pending` shows is this process's own. (A sequence the ledger names
    /// may have been taken since by a new action, which shows none.)
    private static func isCountedAlready(_ pending: PendingAction, countedHere: Set<UInt64>) -> Bool {
        pending.attempts > 0 && countedHere.contains(pending.seq)
    }

    /// Counts an attempt on every pending action of `stored` that this activation runs again,
    /// save those this process counted already (`ledger`, which records the others once
    /// committed), and returns once that is committed, in either durability.
    /// - Throws: ``HostingError/storeUnavailable(_:)`` when the commit failed or did not come in
    ///   time, ``HostingError/ownedElsewhere(retryAfterSeconds:)`` when another node took the
    ///   session meanwhile: then nothing of the session runs.
    static func count(
        for stored: StoredSession, id: String, on committer: GroupCommitter, ledger: AttemptLedger
    ) throws(HostingError) {
        let countedHere = ledger.counted(id: id)
        let attempted = stored.pendingActions.filter {
            runsAgain($0, countedHere: countedHere) && !isCountedAlready($0, countedHere: countedHere)
        }
        guard let last = attempted.last else { return }
        for pending in attempted.dropLast() { committer.enqueue(.attempt(id: id, seq: pending.seq)) }
        // Batches commit in order: the last write's commit is every one's.
        guard let ticket = committer.enqueueAcknowledged(.attempt(id: id, seq: last.seq), inAnyDurability: true) else { return }
        let outcome = Locked<CommitOutcome?>(nil)
        let known = DispatchSemaphore(value: 0)
        ticket.whenCommitted { result in
            outcome.withLock { $0 = result }
            known.signal()
        }
        guard known.wait(timeout: .now() + commitTimeout) == .success else {
            throw HostingError.storeUnavailable("the store did not commit the count of a restart's attempt to run its pending actions")
        }
        switch outcome.withLock({ $0 }) {
        case .committed:
            for pending in attempted { ledger.record(id: id, seq: pending.seq) }
        case .overtaken: throw HostingError.ownedElsewhere(retryAfterSeconds: 1)
        case .failed, nil:
            throw HostingError.storeUnavailable("the store could not count a restart's attempt to run its pending actions")
        }
    }
}
