import Locking
import ReactorCore

/// What runs once a queued write's commit is known: a closure, a version (published once
/// committed), or a ticket a reply waits on (neither of which needs a closure of its own).
enum CommitCompletion: Sendable {
    case body(@Sendable (CommitOutcome) -> Void)
    case version(any PendingVersion)
    case ticket(CommitTicket)

    func callAsFunction(_ outcome: CommitOutcome) {
        switch self {
        case .body(let body): body(outcome)
        case .version(let version): version.committed(outcome)
        case .ticket(let ticket): ticket.complete(outcome)
        }
    }
}

/// What became of a write to the session store.
package enum CommitOutcome: Sendable, Equatable {
    /// It is in the store.
    case committed
    /// The commit failed (a full disk, a store gone away): nothing of it may be acknowledged.
    case failed
    /// The store refused it: another writer (another node) overtook this process on its
    /// session. Nothing of it may be acknowledged; the session's owner can take it.
    case overtaken
}

/// A promise that a write reached the session store: what a reply that must not go out before
/// the commit waits on.
package final class CommitTicket: Sendable {
    private let state = Locked<(outcome: CommitOutcome?, waiters: [@Sendable (CommitOutcome) -> Void])>((nil, []))

    package init() {}

    /// Runs `body` once the write's outcome is known (at once if it is): only
    /// ``CommitOutcome/committed`` may be acknowledged.
    package func whenCommitted(_ body: @escaping @Sendable (_ outcome: CommitOutcome) -> Void) {
        let outcome = state.withLock { state -> CommitOutcome? in
            if state.outcome == nil { state.waiters.append(body) }
            return state.outcome
        }
        if let outcome { body(outcome) }
    }

    /// A ticket for an action taken by a reactor that is behind: it completes once the action
    /// has been applied and `commit` (its record's ticket, if it waits for one) completed, with
    /// `commit`'s outcome. So the sender's acknowledgement waits for the reactor to catch up
    /// (back-pressure), and still promises only what the store has.
    static func afterProcessing<R: Reactor>(_ receipt: ActionReceipt, of reactor: R, andCommit commit: CommitTicket?) -> CommitTicket {
        let joined = CommitTicket()
        reactor.whenProcessed(receipt) {
            guard let commit else { return joined.complete(.committed) }
            commit.whenCommitted { joined.complete($0) }
        }
        return joined
    }

    /// Records the outcome and runs the waiters.
    func complete(_ outcome: CommitOutcome) {
        let waiters = state.withLock { state -> [@Sendable (CommitOutcome) -> Void] in
            state.outcome = outcome
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter(outcome) }
    }
}
