import Dispatch
import Foundation
import MicroHTTP
import ReactorHosting
import Tracing

/// Limits and behaviour of a reactor service. Every field has a flag and an environment
/// variable in `reactor-server`.
public struct ReactorServiceConfiguration: Sendable {
    /// The most live instances; creating one more answers 429.
    public var maxInstances = 100_000
    /// The most open event streams in the whole server; one more answers 503.
    public var maxStreams = 20_000
    /// The most open event streams on one instance; one more answers 429.
    public var maxStreamsPerInstance = 10_000
    /// How many recent states each instance keeps for `Last-Event-ID` replay.
    public var historyCapacity = 256
    /// An instance untouched for this long with no open event stream is disposed.
    public var idleTimeout: Duration = .seconds(30 * 60)
    /// The longest `?wait=true` holds a request before answering 202.
    public var waitTimeout: Duration = .seconds(10)
    /// How often an idle event stream gets a heartbeat comment.
    public var heartbeatInterval: Duration = .seconds(15)
    /// The `retry:` hint sent to event-stream clients, in milliseconds.
    public var retryMilliseconds = 3000
    /// Origins allowed to call the service from a browser (CORS); empty disables CORS,
    /// `["*"]` allows any origin.
    public var allowedOrigins: [String] = []
    /// Threads applying instances' actions (running `mutate`, `reduce` and transforms), apart
    /// from the HTTP threads. Defaults to the number of online processors. `0` applies them on
    /// the HTTP thread that received the action instead: about 13 % less CPU per action when
    /// actions go to many instances (no more throughput in side-by-side runs), but a `mutate`
    /// or `reduce` that never returns then holds that HTTP thread and stalls every connection
    /// it serves.
    public var reactorThreads = HTTPServerConfiguration.activeProcessorCount
    /// How long `mutate`, `reduce` or a transform may run without returning before its instance
    /// counts as stalled: its thread is replaced, and the instance answers 503 to new actions
    /// until the call returns.
    public var stallTimeout: Duration = .seconds(1)
    /// Where sessions are kept; `nil` keeps them in memory only, lost with the process.
    public var store: (any SessionStore)?
    /// When an action counts as accepted and a state as shown: after its commit (`sync`), or at
    /// once with commits every flush interval (`async`).
    public var durability: Durability = .sync
    /// With a store: an instance untouched this long with no open stream and no action in flight
    /// leaves memory; its next request brings it back from the store.
    public var passivateAfter: Duration = .seconds(60)
    /// With a store several nodes share: how long a request for an instance another node holds
    /// waits for it to become this node's (its owner hands it over, or its lease lapses after
    /// the owner died) before it answers `503` `instance-elsewhere`. Zero answers at once.
    public var ownershipWait: Duration = .zero
    /// Who may use the service; nil (the default): anybody who reaches it, each session's id
    /// being its only credential. See ``AuthenticationConfiguration``.
    public var authentication: AuthenticationConfiguration?
    /// With ``authentication``: the most sessions one subject may hold (in memory and in the
    /// store); one more answers `429`. Nil: no limit but ``maxInstances``.
    public var maxInstancesPerSubject: Int?
    /// How long a stop (``ReactorServer/shutdown()``, on SIGTERM) lets actions still in flight
    /// (a `mutate` awaiting a payment, say) finish once it has stopped serving. What is still
    /// running then is cut off; with a store, the reactor's recovery hook is handed each such
    /// action when its session is next brought back. With a store several nodes share, the
    /// node hands its sessions to the others after at most 2 s instead, whatever this says.
    public var stopGrace: Duration = .seconds(5)
    /// Milliseconds since 1970, kept as a session's last activity; replaceable in tests.
    public var wallClock: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }
    /// Monotonic nanoseconds, for idle expiry; replaceable in tests.
    public var now: @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }
    /// Traces each action (a span from its request to its settling, with `decode`, `queue`,
    /// `mutate`, each `reduce` and `first-event-write` under it, carrying the type and the
    /// action's sequence, never the instance id). Nil: the tracer the process bootstrapped with
    /// `InstrumentationSystem`, if any; with none, nothing is traced and actions pay nothing.
    public var tracer: (any Tracer)?

    /// The defaults described on each field.
    public init() {}
}
