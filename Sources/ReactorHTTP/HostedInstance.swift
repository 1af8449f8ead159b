import Logging
import ReactorCore
import Synchronization

/// What every hosted instance shares with its service: one object, built with the service and
/// referenced by each instance, so an instance holds one reference rather than a copy of it all.
final class InstanceContext: Sendable {
    /// Monotonic nanoseconds, for idle expiry.
    let now: @Sendable () -> UInt64
    let historyCapacity: Int
    let subscriberLimit: Int
    let metrics: ServiceMetrics
    let logger: Logger
    /// Where instances' actions are applied; `nil`: on the thread that sends them.
    let drainPool: DrainPool?
    /// How long a call into the reactor may run before the instance counts as stalled.
    let stallTimeout: Duration

    init(now: @escaping @Sendable () -> UInt64, historyCapacity: Int, subscriberLimit: Int,
         metrics: ServiceMetrics, logger: Logger, drainPool: DrainPool?, stallTimeout: Duration) {
        self.now = now
        self.historyCapacity = historyCapacity
        self.subscriberLimit = subscriberLimit
        self.metrics = metrics
        self.logger = logger
        self.drainPool = drainPool
        self.stallTimeout = stallTimeout
    }
}

/// A reactor instance as the HTTP layer sees it: JSON in, versioned JSON states out.
protocol HostedInstance: AnyObject, Sendable {
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
    func send(actionJSON: [UInt8]) throws(Problem) -> ActionReceipt
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
    let timeline: StateTimeline
    let id: String
    let typeName: String

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
        // The closures below reach the metrics and the logger through the shared context: a
        // closure capturing a `Logger` holds its own copy of it (about 25 bytes of RSS per instance).
        let instanceID = id
        if let pool = context.drainPool {
            reactor.applyActions(on: pool) { stalled in
                context.metrics.instanceStalled(stalled)
                if stalled {
                    context.logger.error("instance stalled: mutate, reduce or a transform has not returned; new actions are refused until it does",
                                         metadata: ["instance": "\(instanceID)", "type": "\(typeName)", "after": "\(context.stallTimeout)"])
                } else {
                    context.logger.notice("stalled instance returned; it takes actions again", metadata: ["instance": "\(instanceID)"])
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
            context.metrics.mutationFailed()
            context.logger.warning("mutation failed", metadata: [
                "instance": "\(instanceID)",
                "action": "\(failure.actionSequence.map(String.init) ?? "-")",
                "error": "\(failure.errorType): \(failure.message)",
            ])
            timeline.broadcast(event: ServerSentEvents.event("error", json: Self.problemJSON(for: failure)))
        }
    }

    var lastActivity: UInt64 { activity.load(ordering: .relaxed) }

    func touch() {
        // Stored only when it moved by a millisecond or more: instances expire after seconds,
        // and a store on every request would bounce the cache line between worker threads.
        let now = context.now()
        if now &- activity.load(ordering: .relaxed) >= 1_000_000 {
            activity.store(now, ordering: .relaxed)
        }
    }

    func send(actionJSON: [UInt8]) throws(Problem) -> ActionReceipt {
        let action = try ActionDecoding.decode(R.Action.self, from: actionJSON, rawValue: rawValueDecoder)
        guard let receipt = reactor.sendUnlessStalled(action) else {
            let (seconds, attoseconds) = context.stallTimeout.components
            throw Problem.instanceStalled(id, retryAfter: max(1, Int(seconds) + (attoseconds > 0 ? 1 : 0)))
        }
        return receipt
    }

    func whenSettled(_ receipt: ActionReceipt, _ body: @escaping @Sendable () -> Void) {
        reactor.whenSettled(receipt, body)
    }

    func dispose(_ reason: StreamEndReason) {
        // Disposing the reactor also lets go of its observers.
        reactor.dispose()
        timeline.end(reason)
    }

    /// A mutation error as problem JSON for an `event: error`.
    static func problemJSON(for failure: MutationFailure) -> [UInt8] {
        var object = JSONObjectWriter()
        if let sequence = failure.actionSequence { object.add("action", raw: String(sequence)) }
        object.add("detail", string: failure.message)
        object.add("errorType", string: failure.errorType)
        object.add("title", string: "Mutation failed")
        object.add("type", string: Problem.typePrefix + "mutation-failed")
        return object.finish()
    }
}
