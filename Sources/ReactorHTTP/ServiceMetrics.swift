import Locking
import Metrics
import Prometheus
import Synchronization

/// The service's metrics, through swift-metrics into its own Prometheus registry (so several
/// services in one process never share counters), rendered by `GET /metrics`.
final class ServiceMetrics: Sendable {
    private let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    private let instances: Metrics.Gauge
    private let streams: Metrics.Gauge
    private let actions: Metrics.Counter
    private let mutationErrors: Metrics.Counter
    private let stalls: Metrics.Counter
    private let stalledInstances: Metrics.Gauge
    private let stalledNow = Atomic<Int>(0)
    private let unmatchedRoutes = Locked<[String: RouteMetrics]>([:])

    init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500),
            .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
            .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
        ]
        self.factory = factory
        instances = Metrics.Gauge(label: "reactor_instances", factory: factory)
        streams = Metrics.Gauge(label: "reactor_event_streams", factory: factory)
        actions = Metrics.Counter(label: "reactor_actions_accepted_total", factory: factory)
        mutationErrors = Metrics.Counter(label: "reactor_mutation_errors_total", factory: factory)
        stalls = Metrics.Counter(label: "reactor_stalls_total", factory: factory)
        stalledInstances = Metrics.Gauge(label: "reactor_stalled_instances", factory: factory)
        instances.record(0)
        streams.record(0)
        stalledInstances.record(0)
    }

    /// The request metrics of one route and method; made once per route, when routes are built.
    func route(_ route: String, method: String) -> RouteMetrics {
        RouteMetrics(route: route, method: method, factory: factory)
    }

    /// The request metrics of requests that matched no route, by method.
    func unmatched(method: String) -> RouteMetrics {
        unmatchedRoutes.withLock { routes in
            if let metrics = routes[method] { return metrics }
            let metrics = RouteMetrics(route: "unmatched", method: method, factory: factory)
            routes[method] = metrics
            return metrics
        }
    }

    func instanceCount(_ count: Int) { instances.record(count) }
    func streamCount(_ count: Int) { streams.record(count) }
    func actionAccepted() { actions.increment() }
    func mutationFailed() { mutationErrors.increment() }

    var stalledInstanceCount: Int { stalledNow.load(ordering: .relaxed) }

    /// An instance's turn stalled (`true`) or returned after stalling (`false`).
    func instanceStalled(_ stalled: Bool) {
        if stalled { stalls.increment() }
        stalledInstances.record(stalledNow.wrappingAdd(stalled ? 1 : -1, ordering: .relaxed).newValue)
    }

    /// The Prometheus text exposition of every metric.
    func render() -> [UInt8] {
        registry.emitToBuffer()
    }
}

/// `http_requests_total` (by status) and `http_request_duration_seconds` of one route and
/// method, so answering a request looks nothing up by name.
final class RouteMetrics: Sendable {
    private let route: String
    private let method: String
    private let factory: PrometheusMetricsFactory
    private let duration: Metrics.Timer
    /// The counter of the first status the route answered (almost every answer: 202 for
    /// actions, 200 for reads), read without a lock.
    private let usual = SetOnceReference<StatusCounter>()
    /// A route answers with a handful of statuses: a short list beats hashing.
    private let counters = Locked<[StatusCounter]>([])

    private final class StatusCounter: Sendable {
        let status: Int
        let counter: Metrics.Counter

        init(status: Int, counter: Metrics.Counter) {
            self.status = status
            self.counter = counter
        }
    }

    fileprivate init(route: String, method: String, factory: PrometheusMetricsFactory) {
        self.route = route
        self.method = method
        self.factory = factory
        duration = Metrics.Timer(label: "http_request_duration_seconds", dimensions: [("route", route)], factory: factory)
    }

    /// Counts one answered request and records how long it took.
    func requestFinished(status: Int, nanoseconds: Int64) {
        counter(for: status).increment()
        duration.recordNanoseconds(nanoseconds)
    }

    private func counter(for status: Int) -> Metrics.Counter {
        if let usual = usual.load(), usual.status == status { return usual.counter }
        let known = counters.withLock { counters in
            if let known = counters.first(where: { $0.status == status }) { return known }
            let counter = Metrics.Counter(
                label: "http_requests_total",
                dimensions: [("route", route), ("method", method), ("status", String(status))],
                factory: factory
            )
            let known = StatusCounter(status: status, counter: counter)
            counters.append(known)
            return known
        }
        _ = usual.storeIfNil(known)
        return known.counter
    }
}
