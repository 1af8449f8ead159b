import Locking
import Metrics
import MicroHTTP
import Prometheus
import Synchronization

/// The service's metrics, through swift-metrics into its own Prometheus registry (so several
/// services in one process never share counters), rendered by `GET /metrics`.
final class ServiceMetrics: Sendable {
    private let registry: PrometheusCollectorRegistry
    private let instances: Metrics.Gauge
    private let streams: Metrics.Gauge
    private let mutationErrors: Metrics.Counter
    private let stalls: Metrics.Counter
    private let stalledInstances: Metrics.Gauge
    private let stalledNow = Atomic<Int>(0)
    /// Request counts and durations, and accepted actions: written on every request, so kept
    /// per thread rather than in the registry's shared counters.
    private let requests = RequestStatistics()
    private let unmatchedRoutes = Locked<[String: RouteMetrics]>([:])

    init() {
        registry = PrometheusCollectorRegistry()
        let factory = PrometheusMetricsFactory(registry: registry)
        instances = Metrics.Gauge(label: "reactor_instances", factory: factory)
        streams = Metrics.Gauge(label: "reactor_event_streams", factory: factory)
        mutationErrors = Metrics.Counter(label: "reactor_mutation_errors_total", factory: factory)
        stalls = Metrics.Counter(label: "reactor_stalls_total", factory: factory)
        stalledInstances = Metrics.Gauge(label: "reactor_stalled_instances", factory: factory)
        instances.record(0)
        streams.record(0)
        stalledInstances.record(0)
    }

    /// The request metrics of one route and method; made once per route, when routes are built.
    func route(_ route: String, method: String) -> RouteMetrics {
        requests.route(route, method: method)
    }

    /// The request metrics of requests that matched no route, by method: the standard methods
    /// each, every other token as `other` (a client choosing method names must not add series).
    func unmatched(method: HTTPMethod) -> RouteMetrics {
        let method = method.isStandard ? method.rawValue : "other"
        return unmatchedRoutes.withLock { routes in
            if let metrics = routes[method] { return metrics }
            let metrics = requests.route("unmatched", method: method)
            routes[method] = metrics
            return metrics
        }
    }

    func instanceCount(_ count: Int) { instances.record(count) }
    func streamCount(_ count: Int) { streams.record(count) }
    func actionAccepted() { requests.actionAccepted() }
    func mutationFailed() { mutationErrors.increment() }

    var stalledInstanceCount: Int { stalledNow.load(ordering: .relaxed) }

    /// An instance's turn stalled (`true`) or returned after stalling (`false`).
    func instanceStalled(_ stalled: Bool) {
        if stalled { stalls.increment() }
        stalledInstances.record(stalledNow.wrappingAdd(stalled ? 1 : -1, ordering: .relaxed).newValue)
    }

    /// The Prometheus text exposition of every metric.
    func render() -> [UInt8] {
        registry.emitToBuffer() + Array(requests.render().utf8)
    }
}
