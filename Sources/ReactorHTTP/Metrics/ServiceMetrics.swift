import Locking
import Metrics
import MicroHTTP
import Prometheus
import ReactorHosting
import Synchronization

/// The service's metrics in its own Prometheus registry (so several services in one process
/// never share counters), rendered by `GET /metrics` together with what the process records
/// through swift-metrics (see ``ReactorServer/bootstrapMetrics()``), the process families and the
/// build. Every family has `# HELP` and `# TYPE`.
final class ServiceMetrics: Sendable {
    private let registry: PrometheusCollectorRegistry
    private let instances: Prometheus.Gauge
    private let streams: Prometheus.Gauge
    private let mutationErrors: Prometheus.Counter
    private let replayedActions: Prometheus.Counter
    private let stalls: Prometheus.Counter
    private let stalledInstances: Prometheus.Gauge
    private let storeWaits: Prometheus.Gauge
    private let stalledNow = Atomic<Int>(0)
    /// Request counts and durations, and accepted actions: written on every request, so kept
    /// per thread rather than in the registry's shared counters.
    private let requests = RequestStatistics()
    private let unmatchedRoutes = Locked<[String: RouteMetrics]>([:])
    /// Requests with a method their path has no route for, by route and method.
    private let refusedMethods = Locked<[String: RouteMetrics]>([:])

    /// What the session store's work adds to the metrics; nil without a store.
    let storeObserver: StoreObserver?

    /// - Parameter hasStore: whether the service keeps sessions in a store, whose commits,
    ///   activations and passivations are then counted.
    init(hasStore: Bool = false) {
        let registry = PrometheusCollectorRegistry()
        self.registry = registry
        instances = registry.gauge("reactor_instances", "Reactor instances in memory.")
        streams = registry.gauge("reactor_event_streams", "Open event streams.")
        mutationErrors = registry.counter("reactor_mutation_errors_total", "Errors thrown by reactors' mutations.")
        replayedActions = registry.counter(
            "reactor_actions_replayed_total",
            "Actions sent again with a remembered Idempotency-Key: answered as the first attempt, not sent again.")
        stalls = registry.counter(
            "reactor_stalls_total",
            "Times an instance's mutate, reduce or transform ran past the stall timeout.")
        stalledInstances = registry.gauge(
            "reactor_stalled_instances",
            "Instances inside a call that has not returned within the stall timeout.")
        storeWaits = registry.gauge(
            "reactor_requests_waiting_for_store",
            "Requests being served off the event loops because they need the session store (an instance to bring back, a new id to check).")
        registry.gauge(
            "reactor_server_build_info",
            "The version and commit ReactorServer was built from, and its release; always 1.",
            labels: [("version", BuildInfo.version), ("commit", BuildInfo.commit), ("release", BuildInfo.release)]
        ).set(to: 1)
        storeObserver = hasStore ? Self.storeObserver(registry) : nil
        instances.set(to: 0)
        streams.set(to: 0)
        stalledInstances.set(to: 0)
        storeWaits.set(to: 0)
    }

    /// The session store's metrics, in `registry`, and the observer that records them.
    private static func storeObserver(_ registry: PrometheusCollectorRegistry) -> StoreObserver {
        let milliseconds: [Double] = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]
        let bounds = milliseconds.map { Duration.microseconds(Int64($0 * 1000)) }
        let commits = registry.histogram(
            "reactor_store_commit_duration_seconds",
            "Time each commit of a batch of writes to the session store took, its sync to disk included.", bounds)
        let writes = registry.counter(
            "reactor_store_writes_total",
            "Writes committed to the session store: accepted actions, new states, settled actions and the like.")
        let failures = registry.counter(
            "reactor_store_commit_failures_total",
            "Batches the session store failed to commit (a full disk, a database gone away): nothing of them was acknowledged.")
        let activations = registry.histogram(
            "reactor_store_activation_duration_seconds",
            "Time each activation took: an instance brought back from the session store into memory.", bounds)
        let passivations = registry.counter(
            "reactor_instances_passivated_total",
            "Instances that left memory after --passivate-after-s idle, kept by the session store.")
        let incompatible = registry.counter(
            "reactor_store_incompatible_activations_total",
            "Requests for a stored session that no longer decodes as its reactor type, answered 500 stored-session-incompatible; the session is kept unchanged."
        )
        let damaged = registry.counter(
            "reactor_store_damaged_reads_total",
            "Requests for a stored session the store could not read because it is damaged (SQLite found a page malformed), answered 500 store-damaged."
        )
        let stored = registry.gauge(
            "reactor_store_sessions",
            "Sessions in the session store, every node's with a shared store; counted every few idle sweeps.")
        let size = registry.gauge(
            "reactor_store_bytes",
            "Bytes the session store takes on disk: the SQLite file and its write-ahead log, or the PostgreSQL tables with their indexes (every node's sessions); measured with reactor_store_sessions."
        )
        let queueFull = registry.counter(
            "reactor_store_async_queue_full_total",
            "With async durability, writes that waited for their commit (their action's 202, their state) because \(GroupCommitter.queuedAheadLimit) writes were already queued: the store falls behind."
        )
        let settleTimeouts = registry.counter(
            "reactor_store_settle_wait_timeouts_total",
            "With sync durability, commits that waited for the actions whose records they held to settle, and took them before all had (those actions take longer than a commit): their records were written, and their states go in a later commit."
        )
        let restored = Dictionary(
            uniqueKeysWithValues: RestoredActionOutcome.allCases.map { outcome in
                (
                    outcome,
                    registry.counter(
                        "reactor_store_restored_actions_total",
                        "Acknowledged actions an activation found pending in the session store, by what became of them: sent_again (they had not started), interrupted (cut off mid-flight: handed to the recovery hook), abandoned (a restart was running them again when the process ended again: reported, not run), undecodable (reported, not applied).",
                        labels: [("outcome", outcome.rawValue)])
                )
            })
        return StoreObserver(
            committed: { count, nanoseconds in
                writes.increment(by: Int64(count))
                commits.recordNanoseconds(Int64(clamping: nanoseconds))
            },
            commitFailed: { failures.increment() },
            activated: { activations.recordNanoseconds(Int64(clamping: $0)) },
            passivated: { passivations.increment() },
            incompatible: { incompatible.increment() },
            counted: { stored.set(to: Double($0)) },
            damaged: { damaged.increment() },
            measured: { size.set(to: Double($0)) },
            queueFull: { queueFull.increment() },
            settleWaitTimedOut: { _ in settleTimeouts.increment() },
            restoredAction: { restored[$0]?.increment() })
    }

    /// The request metrics of one route and method; made once per route, when routes are built.
    func route(_ route: String, method: String) -> RouteMetrics {
        requests.route(route, method: method)
    }

    /// The method as a label: the standard methods each, every other token as `other` (a client
    /// choosing method names must not add series).
    private static func label(_ method: HTTPMethod) -> String {
        method.isStandard ? method.rawValue : "other"
    }

    /// The request metrics of requests that matched no route, by method.
    func unmatched(method: HTTPMethod) -> RouteMetrics {
        let method = Self.label(method)
        return unmatchedRoutes.withLock { routes in
            if let metrics = routes[method] { return metrics }
            let metrics = requests.route("unmatched", method: method)
            routes[method] = metrics
            return metrics
        }
    }

    /// The request metrics of requests whose path matched `route` under other methods only:
    /// counted under that route, with the method they used.
    func refused(method: HTTPMethod, route: String) -> RouteMetrics {
        let method = Self.label(method)
        let key = method + " " + route
        return refusedMethods.withLock { routes in
            if let metrics = routes[key] { return metrics }
            let metrics = requests.route(route, method: method)
            routes[key] = metrics
            return metrics
        }
    }

    func instanceCount(_ count: Int) { instances.set(to: Double(count)) }
    func streamCount(_ count: Int) { streams.set(to: Double(count)) }
    func requestsWaitingForStore(_ count: Int) { storeWaits.set(to: Double(count)) }
    func actionAccepted() { requests.actionAccepted() }
    func actionReplayed() { replayedActions.increment() }
    func mutationFailed() { mutationErrors.increment() }

    var stalledInstanceCount: Int { stalledNow.load(ordering: .relaxed) }

    /// An instance's turn stalled (`true`) or returned after stalling (`false`).
    func instanceStalled(_ stalled: Bool) {
        if stalled { stalls.increment() }
        stalledInstances.set(to: Double(stalledNow.wrappingAdd(stalled ? 1 : -1, ordering: .relaxed).newValue))
    }

    /// The Prometheus text exposition of every metric.
    func render() -> [UInt8] {
        registry.emitToBuffer() + Array(requests.render().utf8)
            + Array(ApplicationMetrics.render().utf8) + Array(ProcessMetrics.render().utf8)
    }
}

/// What the process records through swift-metrics, once it is bootstrapped into swift-prometheus's
/// default registry (``ReactorServer/bootstrapMetrics()`` does that, and so does an app's own
/// `MetricsSystem.bootstrap(PrometheusMetricsFactory())`).
enum ApplicationMetrics {
    private static let bootstrapped = Atomic<Bool>(false)

    static func bootstrap() {
        guard !bootstrapped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: PrometheusMetricsFactory.defaultRegistry))
    }

    /// The default registry's text. swift-metrics has no help text, so a family without a
    /// `# HELP` line gets one naming it as recorded through swift-metrics.
    static func render() -> String {
        let text = PrometheusMetricsFactory.defaultRegistry.emitToString()
        guard !text.isEmpty else { return "" }
        var output = ""
        output.reserveCapacity(text.count + 256)
        var previous: Substring = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# TYPE ") {
                let name = line.dropFirst("# TYPE ".count).prefix { $0 != " " }
                if !previous.hasPrefix("# HELP \(name) ") {
                    output += "# HELP \(name) \(name), recorded through swift-metrics.\n"
                }
            }
            output += line
            output += "\n"
            previous = line
        }
        return String(output.dropLast())
    }
}

extension PrometheusCollectorRegistry {
    /// A gauge named `name` with `help` as its `# HELP` text.
    @discardableResult
    fileprivate func gauge(_ name: String, _ help: String, labels: [(String, String)] = []) -> Prometheus.Gauge {
        makeGauge(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
    }

    /// A counter named `name` with `help` as its `# HELP` text.
    fileprivate func counter(_ name: String, _ help: String, labels: [(String, String)] = []) -> Prometheus.Counter {
        makeCounter(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
    }

    /// A histogram of durations named `name`, with `help` as its `# HELP` text.
    fileprivate func histogram(_ name: String, _ help: String, _ bounds: [Duration]) -> DurationHistogram {
        makeDurationHistogram(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), buckets: bounds)
    }
}
