/// Why the hosting layer refused a request. The HTTP layer turns each into its answer.
package enum HostingError: Error, Sendable, Equatable {
    /// The action's JSON could not be decoded; the detail names what was wrong.
    case invalidAction(String)
    /// The table holds its limit of instances.
    case tooManyInstances(limit: Int)
    /// The subject creating an instance holds its limit of sessions (see ``SubjectQuota``).
    case tooManyInstancesForSubject(limit: Int)
    /// The instance holds its limit of subscribers.
    case tooManySubscribers(limit: Int)
    /// The instance has ended (deleted, expired, or the server is stopping).
    case instanceEnded
    /// The instance is inside user code that has not returned within the stall timeout; a retry
    /// after `retryAfterSeconds` may succeed.
    case instanceStalled(retryAfterSeconds: Int)
    /// The session store could not take the write (full disk, lost connection); nothing was
    /// acknowledged. The detail names the store's error.
    case storeUnavailable(String)
    /// The idempotency key came with another action before (the action `seq`, whose JSON
    /// differs): nothing was sent.
    case idempotencyKeyReused(seq: UInt64)
    /// The instance's stored session no longer decodes as its reactor type (a build changed
    /// `State` in a way that filling missing keys from the initial state does not bridge). The
    /// session is kept in the store unchanged; the detail names what does not decode.
    case storedSessionIncompatible(String)
    /// Another node serves the instance now (several nodes share the store); nothing was done.
    /// A retry after `retryAfterSeconds`, through the proxy, reaches its owner.
    case ownedElsewhere(retryAfterSeconds: Int)
    /// The session store is damaged where the request needed it (SQLite found a page malformed):
    /// nothing was done, and a retry will not help until the store is restored from a backup.
    /// The detail names the store's error.
    case storeDamaged(String)
    /// The parameters of a new instance do not decode as its type's parameters, or its factory
    /// refused them; nothing was created. The detail names what was wrong.
    case invalidParameters(String)

    /// The refusal for a request the session store failed: damaged, owned by another node, or
    /// otherwise unavailable (a full disk, a lost connection).
    init(_ error: SessionStoreError) {
        switch error.kind {
        case .corrupt: self = .storeDamaged(error.message)
        case .ownedElsewhere: self = .ownedElsewhere(retryAfterSeconds: 1)
        case .full, .unavailable: self = .storeUnavailable(error.message)
        }
    }
}
