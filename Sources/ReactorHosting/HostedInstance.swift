import Logging
import ReactorCore
import Synchronization

/// What every hosted instance shares with its host: one object, built with the host and
/// referenced by each instance, so an instance holds one reference rather than a copy of it all.
package final class InstanceContext: Sendable {
    /// Monotonic nanoseconds, for idle expiry.
    let now: @Sendable () -> UInt64
    let historyCapacity: Int
    let subscriberLimit: Int
    let logger: Logger
    /// Where instances' actions are applied; `nil`: on the thread that sends them.
    let drainPool: DrainPool?
    /// How long a call into the reactor may run before the instance counts as stalled.
    let stallTimeout: Duration
    /// Told when an instance stalls (`true`) or returns (`false`).
    let stallChanged: @Sendable (Bool) -> Void
    /// Told of every mutation error, after it is logged (to send it to the instance's streams).
    let mutationFailed: @Sendable (_ timeline: StateTimeline, _ failure: MutationFailure) -> Void

    package init(now: @escaping @Sendable () -> UInt64, historyCapacity: Int, subscriberLimit: Int,
                 logger: Logger, drainPool: DrainPool?, stallTimeout: Duration,
                 stallChanged: @escaping @Sendable (Bool) -> Void,
                 mutationFailed: @escaping @Sendable (_ timeline: StateTimeline, _ failure: MutationFailure) -> Void) {
        self.now = now
        self.historyCapacity = historyCapacity
        self.subscriberLimit = subscriberLimit
        self.logger = logger
        self.drainPool = drainPool
        self.stallTimeout = stallTimeout
        self.stallChanged = stallChanged
        self.mutationFailed = mutationFailed
    }
}

/// A hosted reactor instance: JSON actions in, versioned JSON states out.
package protocol HostedInstance: AnyObject, Sendable {
    /// The instance's unguessable id.
    var id: String { get }
    /// The registered type name.
    var typeName: String { get }
    /// The instance's published states and subscribers.
    var timeline: StateTimeline { get }
    /// Monotonic nanoseconds of the last request that touched the instance.
    var lastActivity: UInt64 { get }
    /// Records activity now.
    func touch()
    /// Decodes and sends one action without waiting for it.
    func send(actionJSON: [UInt8]) throws(HostingError) -> ActionReceipt
    /// Calls `body` once every mutation of the action has been reduced.
    func whenSettled(_ receipt: ActionReceipt, _ body: @escaping @Sendable () -> Void)
    /// Cancels the instance's work and ends its streams.
    func dispose(_ reason: StreamEndReason)
}

/// Hosts one reactor: forwards decoded actions to it and mirrors its states and errors into a
/// `StateTimeline` that event streams and `GET` read.
final class HostedReactor<R: Reactor>: HostedInstance {
    // Stored in this order so that what every action and read uses comes first, on as few
    // cache lines as possible (with many instances, most are cold when a request arrives).
    private let activity: Atomic<UInt64>
    private let reactor: R
    private let rawValueDecoder = RawValueDecoder(R.Action.self)
    private let context: InstanceContext
    package let timeline: StateTimeline
    package let id: String
    package let typeName: String

    init(id: String, typeName: String, reactor: R, context: InstanceContext) {
        self.id = id
        self.typeName = typeName
        self.reactor = reactor
        self.context = context
        self.activity = Atomic(context.now())
        let (timeline, publisher) = StateTimeline.make(
            initial: reactor.currentState,
            historyCapacity: context.historyCapacity,
            subscriberLimit: context.subscriberLimit
        )
        self.timeline = timeline
        // The closures below reach the logger through the shared context: a closure capturing
        // a `Logger` holds its own copy of it (about 25 bytes of RSS per instance).
        let instanceID = id
        if let pool = context.drainPool {
            reactor.applyActions(on: pool) { stalled in
                context.stallChanged(stalled)
                let label = InstanceID.logLabel(instanceID)
                if stalled {
                    context.logger.error("instance stalled: mutate, reduce or a transform has not returned; new actions are refused until it does",
                                         metadata: ["instance": "\(label)", "type": "\(typeName)", "after": "\(context.stallTimeout)"])
                } else {
                    context.logger.notice("stalled instance returned; it takes actions again", metadata: ["instance": "\(label)"])
                }
            }
        }
        // Both observers stay until the reactor is disposed (`dispose` below), so they are
        // registered without tokens: two tokens, with what each holds, would be about a fifth of
        // an idle instance's memory.
        reactor.observeStatesUntilDisposed { state, version in
            publisher.publish(state, version: version)
        }
        reactor.observeErrorsUntilDisposed { failure in
            context.logger.warning("mutation failed", metadata: [
                "instance": "\(InstanceID.logLabel(instanceID))",
                "action": "\(failure.actionSequence.map(String.init) ?? "-")",
                "error": "\(failure.errorType): \(failure.message)",
            ])
            context.mutationFailed(timeline, failure)
        }
    }

    package var lastActivity: UInt64 { activity.load(ordering: .relaxed) }

    package func touch() {
        // Stored only when it moved by a millisecond or more: instances expire after seconds,
        // and a store on every request would bounce the cache line between worker threads.
        let now = context.now()
        if now &- activity.load(ordering: .relaxed) >= 1_000_000 {
            activity.store(now, ordering: .relaxed)
        }
    }

    func send(actionJSON: [UInt8]) throws(HostingError) -> ActionReceipt {
        let action = try ActionDecoding.decode(R.Action.self, from: actionJSON, rawValue: rawValueDecoder)
        guard let receipt = reactor.sendUnlessStalled(action) else {
            let (seconds, attoseconds) = context.stallTimeout.components
            throw HostingError.instanceStalled(retryAfterSeconds: max(1, Int(seconds) + (attoseconds > 0 ? 1 : 0)))
        }
        return receipt
    }

    package func whenSettled(_ receipt: ActionReceipt, _ body: @escaping @Sendable () -> Void) {
        reactor.whenSettled(receipt, body)
    }

    package func dispose(_ reason: StreamEndReason) {
        // Disposing the reactor also lets go of its observers.
        reactor.dispose()
        timeline.end(reason)
    }
}
