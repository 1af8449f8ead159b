/// Where sessions (hosted reactor instances) are kept so that they outlive the process: the
/// hosting layer writes through it and loads from it; the runtime and HTTP never see it.
///
/// Writes arrive in batches, each committed as one transaction (group commit): a batch holds
/// everything that arrived while the previous one was committing. Implementations: the embedded
/// SQLite store (`ReactorStoreSQLite`), ``InMemorySessionStore`` for tests, and for several
/// nodes a shared database (each write then carries an owner epoch that rejects a stale writer).
public protocol SessionStore: AnyObject, Sendable {
    /// Commits `writes` in order, in one transaction: all of them or none.
    /// - Returns: the ids of sessions whose writes were refused because a newer writer overtook
    ///   this process: the store holds a version at least as new, or (in a shared store) another
    ///   node has claimed the session. Nothing of theirs in `writes` counts as committed; every
    ///   other write was committed.
    /// - Throws: ``SessionStoreError`` when nothing was committed.
    func commit(_ writes: [SessionWrite]) throws(SessionStoreError) -> Set<String>

    /// The stored session with this id, or nil when there is none (never created, or deleted).
    func load(id: String) throws(SessionStoreError) -> StoredSession?

    /// Whether a session with this id is stored (a new id must not collide with a stored one).
    func contains(id: String) throws(SessionStoreError) -> Bool

    /// How many sessions are stored (in a shared store, every node's). It may read them all, so
    /// it is asked for now and then, for a metric, never on a request's path.
    func count() throws(SessionStoreError) -> Int

    /// How many stored sessions `owner` created (their ``CreationContext/subject``), in a shared
    /// store every node's. Asked each time that subject creates a session while a limit per
    /// subject is set, so it reads an index, not every session.
    func count(owner: String) throws(SessionStoreError) -> Int

    /// How many bytes the store takes on disk (in a shared store, every node's sessions); nil
    /// when it keeps nothing on disk. Asked for with ``count()``, for a metric.
    func diskUsage() throws(SessionStoreError) -> Int?

    /// Deletes the sessions whose last activity is before `cutoff` (milliseconds since 1970)
    /// and that are not in `excluding` (sessions live in memory, which expire by their own clock).
    /// - Returns: the ids of the sessions deleted.
    func deleteIdle(before cutoff: Int64, excluding: Set<String>) throws(SessionStoreError) -> [String]

    /// Takes back one attempt (``SessionWrite/attempt(id:seq:)``) from each action `seq` of
    /// session `id` in `attempts` that is still pending and counts one: this process counted
    /// them and is ending cleanly, so none of them ended it. Without this, an action whose run
    /// again after a restart could not commit (a full disk) would be abandoned by the next
    /// process as if it had ended the last one. An action settled meanwhile is left as it is.
    /// Called by a host as it stops, after its last commit.
    func withdrawAttempts(_ attempts: [String: [UInt64]]) throws(SessionStoreError)

    /// Commits nothing more and releases the store's resources.
    func close()

    /// What keeps the store out of reach now (a shared database that has not answered this
    /// process's last checks), nil while it answers. Cheap: for readiness probes.
    var outage: SessionStoreError? { get }

    /// Whether other processes (nodes) share the store. Then a session is served by one node
    /// at a time, its owner: loading it claims it (or fails with
    /// ``SessionStoreError/Kind/ownedElsewhere`` and asks its owner to hand it over), a new
    /// session is stored unclaimed (the node a proxy routes its id to claims it), and a node that
    /// stops hands its sessions over.
    var isShared: Bool { get }

    /// Registers what to call when the store finds that sessions this process holds are now
    /// owned by another node (its claim lapsed and was taken): they must leave memory at once.
    func onOwnershipLost(_ handler: @escaping @Sendable (Set<String>) -> Void)

    /// Registers what to call when another node asks for a session this process holds (a
    /// request for it reached that node, which the proxy routes it to): it should be handed over.
    func onHandOverRequested(_ handler: @escaping @Sendable (String) -> Void)
}

extension SessionStore {
    /// A store of one process's own.
    public var isShared: Bool { false }

    /// A store that keeps no owners cannot count by them: a limit per subject refuses to create.
    public func count(owner: String) throws(SessionStoreError) -> Int {
        throw SessionStoreError(.unavailable, "this session store cannot count sessions by owner")
    }

    /// Nothing on disk.
    public func diskUsage() throws(SessionStoreError) -> Int? { nil }

    /// A store in this process's own file system or memory: failures show in its commits.
    public var outage: SessionStoreError? { nil }

    /// A store that does not take attempts back keeps them: the next process reports an action
    /// whose run again this one counted and could not commit, rather than running it.
    public func withdrawAttempts(_ attempts: [String: [UInt64]]) throws(SessionStoreError) {}

    /// A store of one process's own never loses a session to another.
    public func onOwnershipLost(_ handler: @escaping @Sendable (Set<String>) -> Void) {}

    /// A store of one process's own has no other node to ask for a session.
    public func onHandOverRequested(_ handler: @escaping @Sendable (String) -> Void) {}
}

/// One change to the stored sessions.
public enum SessionWrite: Sendable {
    /// A new session at version 0. `publishingAhead`: as ``publishingAhead(id:)``, from the start.
    /// `creation`: the JSON of its ``InstanceCreation`` (its parameters and creation context),
    /// nil when it was created without either.
    case create(
        id: String, type: String, state: [UInt8], lastActivity: Int64, publishingAhead: Bool = false,
        creation: [UInt8]? = nil)
    /// An accepted action, kept until it has settled: `seq` is its sequence on the instance.
    /// `key`, when the client sent an idempotency key with it, is kept after it settles, for
    /// the session's next ``RememberedKey/window`` actions.
    case accept(id: String, seq: UInt64, action: [UInt8], key: RememberedKey? = nil)
    /// The action `seq` has settled: every mutation it produced was reduced (or failed, or was
    /// cancelled). Its record is dropped.
    case settle(id: String, seq: UInt64)
    /// The pending action `seq` is about to run again after a restart (sent again, or handed to
    /// the recovery hook): its record counts one more attempt (``PendingAction/attempts``). It is
    /// committed before the action runs, so that an action whose running ends the process is
    /// not run again at every start. A record that is not stored is left as it is.
    case attempt(id: String, seq: UInt64)
    /// A published state. `startedThrough` is the highest action sequence whose `mutate` had been
    /// called when it was published: pending actions after it had not started. `producedBy` is the
    /// sequence of the action whose mutation produced it (0: none did).
    case version(
        id: String, version: UInt64, state: [UInt8], startedThrough: UInt64, producedBy: UInt64,
        lastActivity: Int64)
    /// The session's last activity, written when it leaves memory.
    case touch(id: String, lastActivity: Int64)
    /// The session is gone, with its history and pending actions.
    case delete(id: String)
    /// The session left this process's memory, everything it showed committed: in a shared
    /// store, another node may now claim it. It is no longer ``StoredSession/publishedAhead``.
    case release(id: String)
    /// The session is served by a process that shows versions before they are committed
    /// (``Durability/async``): until its ``release(id:)``, it is ``StoredSession/publishedAhead``.
    case publishingAhead(id: String)
}

/// A session as stored: enough to bring it back exactly where its last commit left it.
public struct StoredSession: Sendable, Equatable {
    /// The registered reactor type.
    public var type: String
    /// The latest committed version and its state's JSON.
    public var version: UInt64
    public var state: [UInt8]
    /// The highest action sequence that had started by `version`.
    public var startedThrough: UInt64
    /// Milliseconds since 1970 of the last request that touched it.
    public var lastActivity: Int64
    /// The kept history, oldest first, ending with `version`: each version with its state's JSON
    /// and the action that produced it. An activation sends these bytes to clients as they are
    /// (`Last-Event-ID`, the history route), once it has checked them: a version whose JSON does
    /// not parse, or spans lines, is sent again by no one, nor is any version before it.
    public var history: [SessionBatch.Version]
    /// Accepted actions that had not settled, by sequence: `(seq, action JSON)`, with how many
    /// kept versions each produced.
    public var pendingActions: [PendingAction]
    /// The idempotency keys of its recent actions (see ``SessionWrite/accept(id:seq:action:key:)``).
    public var rememberedKeys: [RememberedKey]
    /// Whether the process that served it last may have shown clients versions after `version`
    /// that were never committed: it served the session with ``Durability/async`` and did not
    /// leave it cleanly (it crashed, a commit failed, or another node took the session over).
    /// Set by ``SessionWrite/publishingAhead(id:)`` and cleared by ``SessionWrite/release(id:)``.
    public var publishedAhead: Bool
    /// The highest version clients may have been shown of it before a restored backup put it
    /// back at `version`, an earlier one (0: none): it resumes past that version.
    public var shownThrough: UInt64
    /// The JSON of the ``InstanceCreation`` it was made with (its parameters and creation
    /// context), nil when it was created without either: its reactor is made with them again.
    public var creation: [UInt8]?

    /// A stored session created without parameters or a creation context.
    public init(
        type: String, version: UInt64, state: [UInt8], startedThrough: UInt64, lastActivity: Int64,
        history: [SessionBatch.Version], pendingActions: [PendingAction], rememberedKeys: [RememberedKey] = [],
        publishedAhead: Bool = false, shownThrough: UInt64 = 0
    ) {
        self.init(
            type: type, version: version, state: state, startedThrough: startedThrough, lastActivity: lastActivity,
            history: history, pendingActions: pendingActions, rememberedKeys: rememberedKeys,
            publishedAhead: publishedAhead, shownThrough: shownThrough, creation: nil)
    }

    /// A stored session, with the JSON of its ``InstanceCreation`` (nil for none).
    public init(
        type: String, version: UInt64, state: [UInt8], startedThrough: UInt64, lastActivity: Int64,
        history: [SessionBatch.Version], pendingActions: [PendingAction], rememberedKeys: [RememberedKey] = [],
        publishedAhead: Bool = false, shownThrough: UInt64 = 0, creation: [UInt8]?
    ) {
        self.type = type
        self.version = version
        self.state = state
        self.startedThrough = startedThrough
        self.lastActivity = lastActivity
        self.history = history
        self.pendingActions = pendingActions
        self.rememberedKeys = rememberedKeys
        self.publishedAhead = publishedAhead
        self.shownThrough = shownThrough
        self.creation = creation
    }

    public static func == (lhs: StoredSession, rhs: StoredSession) -> Bool {
        lhs.type == rhs.type && lhs.version == rhs.version && lhs.state == rhs.state
            && lhs.startedThrough == rhs.startedThrough && lhs.lastActivity == rhs.lastActivity
            && lhs.history.map(\.version) == rhs.history.map(\.version)
            && lhs.history.map(\.state) == rhs.history.map(\.state)
            && lhs.history.map(\.producedBy) == rhs.history.map(\.producedBy)
            && lhs.pendingActions == rhs.pendingActions
            && lhs.rememberedKeys.sorted(by: { $0.seq < $1.seq }) == rhs.rememberedKeys.sorted(by: { $0.seq < $1.seq })
            && lhs.publishedAhead == rhs.publishedAhead && lhs.shownThrough == rhs.shownThrough
            && lhs.creation == rhs.creation
    }
}

extension StoredSession {
    /// The subject that created the session (its creation context's ``CreationContext/subject``),
    /// nil when nobody in particular did.
    public var owner: String? { creation.flatMap(SessionWrite.owner(ofCreation:)) }
}

extension SessionWrite {
    /// The subject in a stored creation's JSON (see ``InstanceCreation/json``): the owner a
    /// store keeps beside it, so that it can count each subject's sessions.
    public static func owner(ofCreation json: [UInt8]) -> String? {
        InstanceCreation(json: json)?.context.subject
    }
}

/// An accepted action that had not settled when its session was stored.
public struct PendingAction: Sendable, Equatable {
    /// Its sequence on the instance.
    public var seq: UInt64
    /// Its JSON, as it was sent.
    public var action: [UInt8]
    /// How many of the stored versions it produced (its mutations reduced and kept).
    public var producedVersions: Int
    /// How many times a restart began to run it again (``SessionWrite/attempt(id:seq:)``): one
    /// still pending after an attempt was running when the process ended again, perhaps because
    /// of it, and is reported instead of run once more.
    public var attempts: Int

    /// A pending action.
    public init(seq: UInt64, action: [UInt8], producedVersions: Int = 0) {
        self.init(seq: seq, action: action, producedVersions: producedVersions, attempts: 0)
    }

    /// A pending action that restarts began to run again `attempts` times.
    public init(seq: UInt64, action: [UInt8], producedVersions: Int = 0, attempts: Int) {
        self.seq = seq
        self.action = action
        self.producedVersions = producedVersions
        self.attempts = attempts
    }
}

/// Why a store could not do what it was asked; nothing of the failed call was committed.
public struct SessionStoreError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure it is.
    public enum Kind: Sendable {
        /// The disk (or the store's size limit) is full: retry once space is freed.
        case full
        /// The store cannot be opened or written (permissions, a missing directory, a lost
        /// connection).
        case unavailable
        /// The stored data is not a session store, or is damaged: it is left untouched.
        case corrupt
        /// Another node owns the session now (a shared store): retry shortly, through the proxy
        /// that routes to its owner.
        case ownedElsewhere
    }

    /// What kind of failure it is.
    public var kind: Kind
    /// What failed, in words, naming the path or statement.
    public var message: String

    /// A store error.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
