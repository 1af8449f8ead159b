import Foundation
import Locking
import Logging
import ReactorCore
import Synchronization
import Tracing

/// What every hosted instance shares with its host: one object, built with the host and
/// referenced by each instance, so an instance holds one reference rather than a copy of it all.
package final class InstanceContext: Sendable {
    /// Monotonic nanoseconds, for idle expiry.
    let now: @Sendable () -> UInt64
    /// Milliseconds since 1970, for the last activity kept in the store.
    let wallClock: @Sendable () -> Int64
    let historyCapacity: Int
    let subscriberLimit: Int
    let logger: Logger
    /// Where instances' actions are applied; `nil`: on the thread that sends them.
    let drainPool: DrainPool?
    /// How long a call into the reactor may run before the instance counts as stalled.
    let stallTimeout: Duration
    /// Actions taken and not yet applied past which an acknowledgement waits for its action to
    /// be applied (see ``HostingConfiguration/actionBacklogLimit``); no limit without reactor
    /// threads, where the sender applies its action itself.
    let actionBacklogLimit: UInt64
    /// Where instances are kept; `nil`: in memory only.
    let committer: GroupCommitter?
    /// Told when an instance stalls (`true`) or returns (`false`).
    let stallChanged: @Sendable (Bool) -> Void
    /// Frames a mutation error as an event for the instance's streams.
    let errorEvent: @Sendable (MutationFailure) -> [UInt8]
    /// Told of every mutation error.
    let mutationFailed: @Sendable () -> Void
    /// Traces each action (see ``ActionTraces``); nil: nothing is traced.
    let tracer: (any Tracer)?
    /// Told what an activation did with each acknowledged action it found pending.
    let restoredAction: @Sendable (RestoredActionOutcome) -> Void
    /// The attempts to run pending actions again that this process counted.
    let attempts: AttemptLedger

    package init(
        now: @escaping @Sendable () -> UInt64, wallClock: @escaping @Sendable () -> Int64,
        historyCapacity: Int, subscriberLimit: Int, logger: Logger, drainPool: DrainPool?,
        stallTimeout: Duration, actionBacklogLimit: UInt64 = 1_024, committer: GroupCommitter?,
        stallChanged: @escaping @Sendable (Bool) -> Void,
        errorEvent: @escaping @Sendable (MutationFailure) -> [UInt8],
        mutationFailed: @escaping @Sendable () -> Void, tracer: (any Tracer)? = nil,
        restoredAction: @escaping @Sendable (RestoredActionOutcome) -> Void = { _ in }, attempts: AttemptLedger = AttemptLedger()
    ) {
        self.now = now
        self.wallClock = wallClock
        self.historyCapacity = historyCapacity
        self.subscriberLimit = subscriberLimit
        self.logger = logger
        self.drainPool = drainPool
        self.stallTimeout = stallTimeout
        self.actionBacklogLimit = drainPool == nil ? .max : actionBacklogLimit
        self.committer = committer
        self.stallChanged = stallChanged
        self.errorEvent = errorEvent
        self.mutationFailed = mutationFailed
        self.tracer = tracer
        self.restoredAction = restoredAction
        self.attempts = attempts
    }
}

/// A hosted reactor instance: JSON actions in, versioned JSON states out.
package protocol HostedInstance: AnyObject, Sendable {
    /// The instance's unguessable id.
    var id: String { get }
    /// The registered type name.
    var typeName: String { get }
    /// The subject that created it (its ``CreationContext/subject``), to whom alone it is served
    /// (besides an admin); nil when it was created by nobody in particular.
    var owner: String? { get }
    /// The instance's published states and subscribers.
    var timeline: StateTimeline { get }
    /// Monotonic nanoseconds of the last request that touched the instance.
    var lastActivity: UInt64 { get }
    /// Whether actions are queued or running (the instance must stay in memory).
    var isBusy: Bool { get }
    /// Records activity now.
    func touch()
    /// The spans of the instance's actions; nil when nothing is traced.
    var traces: ActionTraces? { get }
    /// Decodes and sends one action without waiting for it. With a store in ``Durability/sync``
    /// the ticket tells when the action is committed, which is when it may be acknowledged;
    /// `nil` means at once. `trace`, from ``ActionTraces/startAction(continuing:using:)``, is the action's
    /// span: its steps are traced under it, and it ends when the action settles.
    func send(actionJSON: [UInt8], trace: (any Span)?) throws(HostingError) -> (ActionReceipt, CommitTicket?)
    /// ``send(actionJSON:trace:)`` with the client's idempotency key: an action sent with a key
    /// the instance remembers (from its last ``RememberedKey/window`` actions, across restarts
    /// with a store) is not sent again; the receipt and ticket are the first attempt's, and
    /// `isReplay` is true. The same key with other JSON throws
    /// ``HostingError/idempotencyKeyReused(seq:)``.
    func send(actionJSON: [UInt8], trace: (any Span)?, idempotencyKey: String)
        throws(HostingError) -> (receipt: ActionReceipt, ticket: CommitTicket?, isReplay: Bool)
    /// Calls `body` once every mutation of the action has been reduced and the states it
    /// produced are published (committed first, with a store in ``Durability/sync``), with the
    /// outcome of the commit that took them: anything but ``CommitOutcome/committed`` means
    /// they are not in the store, so nothing of them may be acknowledged. Without a store,
    /// always ``CommitOutcome/committed``.
    func whenSettled(_ receipt: ActionReceipt, reportingCommit body: @escaping @Sendable (CommitOutcome) -> Void)
    /// Cancels the instance's work and ends its streams (`nil`: without an end event, when
    /// the instance only leaves memory).
    func dispose(_ reason: StreamEndReason?)
    /// How the instance went, once ``dispose(_:)`` began (before the work it cancels settles);
    /// nil while it serves.
    var departure: InstanceDeparture? { get }
    /// Whether a failed commit dropped it (see ``GroupCommitter``): memory must not run ahead of
    /// the store, so it leaves memory, and nothing it queues any more is committed.
    var wasDroppedByFailedCommit: Bool { get }
}

/// How an instance went: what became of an action still running when it did.
package enum InstanceDeparture: UInt8, Sendable {
    /// Deleted or expired: an action cut off then never finishes.
    case deleted = 1
    /// It left memory (passivated, handed over, the server stopping): an action cut off then
    /// stays accepted, for the recovery hook where the session is brought back.
    case leftMemory = 2
}

extension HostedInstance {
    /// ``whenSettled(_:reportingCommit:)`` for a caller that acknowledges nothing.
    package func whenSettled(_ receipt: ActionReceipt, _ body: @escaping @Sendable () -> Void) {
        whenSettled(receipt, reportingCommit: { _ in body() })
    }

    /// Nothing is traced, unless the instance says otherwise.
    package var traces: ActionTraces? { nil }

    /// Sends one action, untraced (see ``send(actionJSON:trace:)``).
    package func send(actionJSON: [UInt8]) throws(HostingError) -> (ActionReceipt, CommitTicket?) {
        try send(actionJSON: actionJSON, trace: nil)
    }
}

/// Hosts one reactor: forwards decoded actions to it and mirrors its states and errors into a
/// `StateTimeline` that event streams and `GET` read. With a session store, it writes every
/// accepted action and published state there (see ``GroupCommitter``).
final class HostedReactor<R: Reactor>: HostedInstance {
    // Stored in this order so that what every action and read uses comes first, on as few
    // cache lines as possible (with many instances, most are cold when a request arrives).
    private let activity: Atomic<UInt64>
    private let reactor: R
    private let rawValueDecoder = RawValueDecoder(R.Action.self)
    private let context: InstanceContext
    /// The idempotency keys of its recent actions, made on the first keyed one.
    private let keys = SetOnceReference<IdempotencyKeys>()
    package let timeline: StateTimeline
    package let id: String
    package let typeName: String
    package let traces: ActionTraces?
    package let owner: String?
    /// What it has in the batch the store's committer is queuing (nil without a store).
    private let queuedWrites: QueuedSession?
    /// ``departure``'s raw value; 0 while it serves.
    private let departed = Atomic<UInt8>(0)

    /// A new instance, or one brought back from `restored` (its stored session), whose
    /// unstarted actions are sent again and whose interrupted ones go to the recovery hook.
    init(
        id: String, typeName: String, owner: String?, reactor: R, context: InstanceContext,
        restored: Restoration<R>? = nil
    ) {
        self.id = id
        self.typeName = typeName
        self.owner = owner
        self.reactor = reactor
        self.context = context
        self.activity = Atomic(context.now())
        if let tracer = context.tracer {
            let traces = ActionTraces(tracer: tracer, typeName: typeName)
            reactor.runtime.setProbe(traces)
            self.traces = traces
        } else {
            self.traces = nil
        }
        // Where its versions resume: past any that clients may have been shown with other states
        // (by a crashed process, or by the store a restored backup replaced).
        let resumedVersion = restored?.resumedVersion ?? 0
        if let restored {
            _ = reactor.runtime.restore(
                reactor, state: restored.state, version: resumedVersion,
                sequence: restored.stored.startedThrough)
            if !restored.stored.rememberedKeys.isEmpty {
                _ = keys.storeIfNil(IdempotencyKeys(restoring: restored.stored.rememberedKeys))
            }
        }
        let (timeline, publisher) = StateTimeline.make(
            restoring: reactor.currentState,
            version: resumedVersion,
            json: restored?.stateJSON,
            history: restored?.history ?? [],
            // When each stored version was published is not kept; which action produced it is.
            origins: restored?.stored.history.map { VersionOrigin(version: $0.version, producedBy: $0.producedBy, publishedAt: nil) } ?? [],
            historyCapacity: context.historyCapacity,
            subscriberLimit: context.subscriberLimit
        )
        self.timeline = timeline
        // With async durability, the latest version waits in a slot for its batch (see
        // `LatestVersionSlot`).
        let slot = context.committer?.publishesAhead == true ? VersionSlot(id: id, publisher: publisher) : nil
        let queuedWrites = context.committer == nil ? nil : slot.map { QueuedSession(slot: $0) } ?? QueuedSession()
        self.queuedWrites = queuedWrites
        // The closures below reach the logger through the shared context: a closure capturing
        // a `Logger` holds its own copy of it (about 25 bytes of RSS per instance).
        let instanceID = id
        if let pool = context.drainPool {
            reactor.applyActions(on: pool) { stalled in
                context.stallChanged(stalled)
                let label = InstanceID.logLabel(instanceID)
                if stalled {
                    context.logger.error(
                        "instance stalled: mutate, reduce or a transform has not returned; new actions are refused until it does",
                        metadata: ["instance": "\(label)", "type": "\(typeName)", "after": "\(context.stallTimeout)"])
                } else {
                    context.logger.notice("stalled instance returned; it takes actions again", metadata: ["instance": "\(label)"])
                }
            }
        }
        // Both observers stay until the reactor is disposed (`dispose` below), so they are
        // registered without tokens: two tokens, with what each holds, would be about a fifth of
        // an idle instance's memory.
        // The observers reach the runtime unowned: it holds them, and calls them only while it
        // is alive (a strong reference would keep it, and all the closures hold, from ever
        // being freed if the instance is let go without being disposed).
        let runtime = reactor.runtime
        if let committer = context.committer {
            if let restored {
                committer.markServed(restored, id: id, resumedVersion: resumedVersion)
                if restored.skipsVersions {
                    context.logger.info(
                        "versions resume past those clients may have been shown with other states",
                        metadata: [
                            "instance": "\(InstanceID.logLabel(id))", "stored": "\(restored.stored.version)",
                            "now": "\(resumedVersion)",
                            "because":
                                "\(restored.stored.publishedAhead ? "its last process served it ahead of the store and did not leave it cleanly" : "a restored backup took it back")",
                        ])
                }
            }
            let startVersion = resumedVersion
            reactor.observeStatesUntilDisposed { [unowned runtime] state, version in
                // The observer hears the state it starts from first: that one is stored already.
                guard version > startVersion else { return }
                let now = context.wallClock()
                let origin = VersionOrigin(version: version, producedBy: runtime.producingActionForObserver, publishedAt: now)
                let startedThrough = runtime.startedThroughForObserver
                // Into its slot, after the versions there (dropping the last if its action settled),
                // without the committer's queue: shown at once. Else queued as below.
                if let slot,
                    committer.offer(state, to: slot, origin: origin, startedThrough: startedThrough, lastActivity: now)
                {
                    let watched = publisher.publish(state, version: version, origin: origin)
                    return slot.lastShownWatched.store(watched, ordering: .relaxed)
                }
                // Encoded by the commit thread if its batch keeps it; then the same bytes are
                // stored and sent to the readers it has when committed.
                committer.enqueue(
                    PublishedVersion(
                        id: instanceID, state: state, origin: origin, startedThrough: startedThrough,
                        lastActivity: now, publisher: publisher),
                    of: queuedWrites)
                slot?.lastShownWatched.store(publisher.timeline.subscriberCount > 0, ordering: .relaxed)
            }
        } else {
            reactor.observeStatesUntilDisposed { [unowned runtime] state, version in
                let origin = VersionOrigin(
                    version: version, producedBy: runtime.producingActionForObserver,
                    publishedAt: context.wallClock())
                publisher.publish(state, version: version, origin: origin)
            }
        }
        reactor.observeErrorsUntilDisposed { failure in
            context.logger.warning(
                "mutation failed",
                metadata: [
                    "instance": "\(InstanceID.logLabel(instanceID))",
                    "action": "\(failure.actionSequence.map(String.init) ?? "-")",
                    "error": "\(failure.errorType): \(failure.message)",
                ])
            context.mutationFailed()
            timeline.broadcast(event: context.errorEvent(failure))
        }
        if let restored { resume(restored) }
        // After `resume`, whose actions settle through `settleWhenDone`: a renumbered one's new
        // record is queued after it was sent, and must not be settled ahead of it.
        if let committer = context.committer {
            let id = self.id
            let queuedWrites = self.queuedWrites
            reactor.observeSettlementsUntilDisposed { sequence in
                committer.enqueue(.settle(id: id, seq: sequence), of: queuedWrites)
            }
        }
    }

    /// Reports and hands to the recovery hook the actions cut off mid-flight, reports those that
    /// are not run again, and sends again the acknowledged ones that had not started.
    private func resume(_ restored: Restoration<R>) {
        let label = InstanceID.logLabel(id)
        for interrupted in restored.interrupted {
            let seq = interrupted.sequence
            reportAndSettle(
                seq, .interrupted, level: .warning,
                "action cut off before it settled, by a crash or a stop that did not wait for it; handed to the reactor's recovery hook",
                metadata: ["reducedMutations": "\(interrupted.reducedMutations)"],
                errorType: "InterruptedAction",
                message:
                    "action \(seq) was interrupted by a restart after \(interrupted.reducedMutations) of its mutations; the reactor's recovery hook decided what to do with it"
            )
        }
        for (seq, attempts) in restored.abandoned {
            reportAndSettle(
                seq, .abandoned, level: .error,
                "an acknowledged action was being run again after a restart when the process ended again, perhaps because of it; reported and not run again",
                metadata: ["type": "\(typeName)", "attempts": "\(attempts)"],
                errorType: "AbandonedAction",
                message:
                    "action \(seq) was being run again after a restart when the process ended again, perhaps because of it; it was not run again"
            )
        }
        for (seq, reason) in restored.undecodable {
            reportAndSettle(
                seq, .undecodable, level: .error,
                "an acknowledged action no longer decodes as this type's Action; reported and not applied",
                metadata: ["type": "\(typeName)", "error": "\(reason)"],
                errorType: "UndecodableAction",
                message:
                    "action \(seq) was accepted by an earlier build and no longer decodes as this type's Action (\(reason)); it was not applied"
            )
        }
        if !restored.interrupted.isEmpty {
            reactor.runtime.apply(reactor.recover(interrupted: restored.interrupted), reactor: reactor)
        }
        for (seq, action, json) in restored.unstarted {
            context.restoredAction(.sentAgain)
            let receipt = reactor.send(action)
            timeline.record(ActionRecord(seq: receipt.sequence, json: json, acceptedAt: context.wallClock()))
            context.logger.info(
                "acknowledged action applied after a restart",
                metadata: ["instance": "\(label)", "action": "\(seq)", "now": "\(receipt.sequence)"])
            if receipt.sequence != seq {
                let key = keys.load()?.renumber(seq, to: receipt.sequence)
                context.committer?.enqueue(.accept(id: id, seq: receipt.sequence, action: json, key: key), of: queuedWrites)
                // Its attempt, counted under its old number, moves with it.
                context.committer?.enqueue(.attempt(id: id, seq: receipt.sequence), of: queuedWrites)
                context.attempts.record(id: id, seq: receipt.sequence)
                context.committer?.enqueue(.settle(id: id, seq: seq), of: queuedWrites)
            }
            settleWhenDone(receipt)
        }
    }

    /// Logs what became of the restored action `seq` (`outcome`, which the metrics count),
    /// reports it on the instance's next streams as an `error` event, and settles its record.
    private func reportAndSettle(
        _ seq: UInt64, _ outcome: RestoredActionOutcome, level: Logger.Level, _ log: Logger.Message, metadata: Logger.Metadata,
        errorType: String, message: String
    ) {
        context.restoredAction(outcome)
        context.logger.log(
            level: level, log, metadata: metadata.merging(["instance": "\(InstanceID.logLabel(id))", "action": "\(seq)"]) { $1 })
        timeline.retain(event: context.errorEvent(MutationFailure(actionSequence: seq, errorType: errorType, message: message)))
        context.committer?.enqueue(.settle(id: id, seq: seq), of: queuedWrites)
    }

    package var lastActivity: UInt64 { activity.load(ordering: .relaxed) }

    package var isBusy: Bool { reactor.runtime.hasActionsInFlight }

    package func touch() {
        // Stored only when it moved by a millisecond or more: instances expire after seconds,
        // and a store on every request would bounce the cache line between worker threads.
        let now = context.now()
        if now &- activity.load(ordering: .relaxed) >= 1_000_000 {
            activity.store(now, ordering: .relaxed)
        }
    }

    package func send(actionJSON: [UInt8], trace: (any Span)?, idempotencyKey: String)
        throws(HostingError) -> (receipt: ActionReceipt, ticket: CommitTicket?, isReplay: Bool)
    {
        let digest = RememberedKey.digest(of: actionJSON)
        let keys = self.keys.load() ?? self.keys.storeIfNil(IdempotencyKeys())
        let (remembered, ticket, isReplay) = try keys.lookUpOrSend(idempotencyKey, digest: digest) { () throws(HostingError) in
            let (receipt, ticket) = try send(actionJSON: actionJSON, trace: trace, key: (idempotencyKey, digest))
            return (receipt.sequence, ticket)
        }
        if isReplay {
            trace?.end()
            guard remembered.digest == digest else { throw HostingError.idempotencyKeyReused(seq: remembered.seq) }
        }
        return (ActionReceipt(sequence: remembered.seq), ticket, isReplay)
    }

    package func send(actionJSON: [UInt8], trace: (any Span)?) throws(HostingError) -> (ActionReceipt, CommitTicket?) {
        try send(actionJSON: actionJSON, trace: trace, key: nil)
    }

    /// Sends the action, its record carrying `key` (the idempotency key and the JSON's digest)
    /// when the client sent one.
    private func send(actionJSON: [UInt8], trace: (any Span)?, key: (String, UInt64)?)
        throws(HostingError) -> (ActionReceipt, CommitTicket?)
    {
        let traces = trace == nil ? nil : self.traces
        let action: R.Action
        if let traces {
            action = try traces.decoding(under: trace) { () throws(HostingError) in try decode(actionJSON) }
        } else {
            action = try decode(actionJSON)
        }
        if let committer = context.committer, let error = committer.lastError {
            trace?.end()
            throw HostingError(error)
        }
        // The action's record is queued for the store as the reactor takes it, before anything
        // can apply it: what the action produces is never committed ahead of its record, so an
        // action whose record fails to commit (and is refused) has left nothing in the store.
        var ticket: CommitTicket?
        var isBehind = false
        let acceptedAt = context.wallClock()
        let committer = context.committer
        let id = self.id
        let backlogLimit = context.actionBacklogLimit
        let queuedWrites = self.queuedWrites
        let taken = reactor.sendUnlessStalled(action) { sequence, backlog in
            isBehind = backlog >= backlogLimit
            let remembered = key.map { RememberedKey(key: $0.0, seq: sequence, digest: $0.1) }
            ticket = committer?.enqueueAcknowledged(
                .accept(id: id, seq: sequence, action: actionJSON, key: remembered), of: queuedWrites)
            if let traces, let trace {
                traces.accepted(trace, sequence: sequence)
                if let ticket { traces.committing(trace, sequence: sequence, ticket: ticket) }
            }
        }
        guard let receipt = taken else {
            trace?.end()
            // Left memory (passivated, handed over) as this request held it: nothing was applied;
            // the caller looks the instance up again, which brings it back from the store.
            if reactor.isDisposed { throw HostingError.instanceEnded }
            let (seconds, attoseconds) = context.stallTimeout.components
            throw HostingError.instanceStalled(retryAfterSeconds: max(1, Int(seconds) + (attoseconds > 0 ? 1 : 0)))
        }
        timeline.record(ActionRecord(seq: receipt.sequence, json: actionJSON, acceptedAt: acceptedAt))
        // Taken by a live reactor: stored even if the instance leaves memory now. Its next
        // activation applies it once (it had not started) or hands it to the recovery hook (it
        // was cut off), so it is never applied twice by a retry. Its record is dropped once it
        // settles (the settle observer set up in `init`).
        if let traces, trace != nil {
            reactor.whenSettled(receipt) { traces.settled(sequence: receipt.sequence) }
        }
        if isBehind { ticket = CommitTicket.afterProcessing(receipt, of: reactor, andCommit: ticket) }
        return (receipt, ticket)
    }

    private func decode(_ actionJSON: [UInt8]) throws(HostingError) -> R.Action {
        try ActionDecoding.decode(R.Action.self, from: actionJSON, rawValue: rawValueDecoder)
    }

    /// Drops the action's record from the store once it has settled: for an action sent again
    /// after a restart, before the settle observer is registered (a later one settles it twice,
    /// which drops nothing more).
    private func settleWhenDone(_ receipt: ActionReceipt) {
        guard let committer = context.committer else { return }
        let id = self.id
        let reactor = self.reactor
        let queuedWrites = self.queuedWrites
        reactor.whenSettled(receipt) {
            // Disposing cuts the action off rather than settling it: its record stays, and the
            // next activation hands it to the recovery hook.
            guard !reactor.isDisposed else { return }
            committer.enqueue(.settle(id: id, seq: receipt.sequence), of: queuedWrites)
        }
    }

    package func whenSettled(_ receipt: ActionReceipt, reportingCommit body: @escaping @Sendable (CommitOutcome) -> Void) {
        guard let committer = context.committer else { return reactor.whenSettled(receipt) { body(.committed) } }
        // The states the action produced were queued for the store before it settled.
        reactor.whenSettled(receipt) { committer.afterQueuedWrites(body) }
    }

    package var departure: InstanceDeparture? { InstanceDeparture(rawValue: departed.load(ordering: .acquiring)) }

    package var wasDroppedByFailedCommit: Bool {
        guard let committer = context.committer, let queuedWrites else { return false }
        return committer.hasDropped(queuedWrites)
    }

    package func dispose(_ reason: StreamEndReason?) {
        // Before the reactor's work is cancelled, which settles its actions: whoever waits for
        // one of them then knows it did not finish.
        let departure: InstanceDeparture = reason == .deleted || reason == .expired ? .deleted : .leftMemory
        departed.store(departure.rawValue, ordering: .releasing)
        // Disposing the reactor also lets go of its observers.
        reactor.dispose()
        traces?.endAll()
        if let reason { timeline.end(reason) }
    }
}

extension GroupCommitter {
    /// Writes what the store must hold before an activated session shows anything new: the
    /// skip of its versions (``Restoration/skipsVersions``), or, with ``Durability/async``, that
    /// this process shows its versions ahead of the store. Later writes of the session wait for it.
    ///
    /// The skipped-to version is shown before it is committed: until it is, every activation
    /// skips from the same stored version to the same number, with the same state.
    fileprivate func markServed<R: Reactor>(_ restored: Restoration<R>, id: String, resumedVersion: UInt64) {
        if restored.skipsVersions {
            enqueueHeld(
                .version(
                    id: id, version: resumedVersion, state: restored.stateJSON,
                    startedThrough: restored.stored.startedThrough, producedBy: 0,
                    lastActivity: restored.stored.lastActivity))
        }
        if publishesAhead && !restored.stored.publishedAhead { enqueueHeld(.publishingAhead(id: id)) }
    }
}
