import Locking
import Metrics
import Prometheus

/// The service's metrics, through swift-metrics into its own Prometheus registry (so several
/// services in one process never share counters), rendered by `GET /metrics`.
final class ServiceMetrics: Sendable {
    private let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    private let instances: Metrics.Gauge
    private let streams: Metrics.Gauge
    private let actions: Metrics.Counter
    private let mutationErrors: Metrics.Counter
    private let requestCounters = Locked<[RequestKey: Metrics.Counter]>([:])
    private let requestTimers = Locked<[String: Metrics.Timer]>([:])

    private struct RequestKey: Hashable {
        let route: String
        let method: String
        let status: Int
    }

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
        instances.record(0)
        streams.record(0)
    }

    /// Counts one answered request and records how long it took.
    func requestFinished(route: String, method: String, status: Int, nanoseconds: Int64) {
        let key = RequestKey(route: route, method: method, status: status)
        let counter = requestCounters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Metrics.Counter(
                label: "http_requests_total",
                dimensions: [("route", route), ("method", method), ("status", String(status))],
                factory: factory
            )
            counters[key] = counter
            return counter
        }
        counter.increment()
        let timer = requestTimers.withLock { timers in
            if let timer = timers[route] { return timer }
            let timer = Metrics.Timer(label: "http_request_duration_seconds", dimensions: [("route", route)],
                                      factory: factory)
            timers[route] = timer
            return timer
        }
        timer.recordNanoseconds(nanoseconds)
    }

    func instanceCount(_ count: Int) { instances.record(count) }
    func streamCount(_ count: Int) { streams.record(count) }
    func actionAccepted() { actions.increment() }
    func mutationFailed() { mutationErrors.increment() }

    /// The Prometheus text exposition of every metric.
    func render() -> [UInt8] {
        registry.emitToBuffer()
    }
}
