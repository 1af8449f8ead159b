import Dispatch
import Locking
import Logging
import MicroHTTP
import ReactorHosting
import ServiceLifecycle

/// A reactor service on its own HTTP server, with idle-instance expiry running.
///
/// It is a swift-service-lifecycle `Service`: run it in a `ServiceGroup`, which stops it
/// gracefully on SIGTERM or SIGINT (or any graceful shutdown of the group):
///
/// ```swift
/// let server = ReactorServer(registry: registry)
/// let group = ServiceGroup(services: [server], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
/// try await group.run()
/// ```
///
/// or drive it by hand: `try server.start()`, and later `server.shutdown()`.
public final class ReactorServer: Service, Sendable {
    /// The reactor service behind the routes.
    public let service: ReactorService
    private let http: HTTPServer
    private let expiryPeriod: Duration
    private let expiry = Locked<IdleSweeper?>(nil)
    private let logger: Logger
    /// The HTTP event loops and the threads applying actions, for the log.
    private let threadCounts: (http: Int, reactor: Int)
    /// Whether the server has started, and whether it has stopped since.
    private let phase = Locked(Phase.idle)

    private enum Phase { case idle, running, stopped }

    /// Points swift-metrics (`MetricsSystem`) at swift-prometheus's default registry, which
    /// `/metrics` serves beside the server's own families: counters, gauges and timers that
    /// reactors (or anything else in the process) record through swift-metrics then reach
    /// `/metrics`. Call it once, before making reactors; later calls do nothing. An app that
    /// bootstraps `PrometheusMetricsFactory()` itself needs not call it.
    public static func bootstrapMetrics() {
        ApplicationMetrics.bootstrap()
    }

    /// Creates a server; nothing listens until `start()`.
    public init(
        registry: ReactorRegistry,
        configuration: ReactorServiceConfiguration = .init(),
        http httpConfiguration: HTTPServerConfiguration = .init(),
        logger: Logger = Logger(label: "reactor-server")
    ) {
        let service = ReactorService(registry: registry, configuration: configuration, logger: logger)
        var httpConfiguration = httpConfiguration
        httpConfiguration.errorResponse = { status, detail in
            service.serverErrorResponse(status: status, detail: detail)
        }
        // Requests still waiting for their action when a stop stops waiting for them are answered
        // 202, as accepted, not refused.
        let beforeRefusing = httpConfiguration.beforeRefusingPendingReplies
        httpConfiguration.beforeRefusingPendingReplies = {
            beforeRefusing?()
            service.answerWaitingRequestsAsAccepted()
        }
        if httpConfiguration.libraryMessageHandler == nil {
            httpConfiguration.libraryMessageHandler = LibraryMessageLog(logger: logger).log
        }
        let router = service.makeRouter()
        self.service = service
        self.logger = logger
        self.threadCounts = (
            min(max(1, httpConfiguration.threads), max(1, httpConfiguration.connectionLimit)),
            configuration.reactorThreads
        )
        self.http = HTTPServer(configuration: httpConfiguration) { request in router.handle(request) }
        let shortest =
            configuration.store == nil
            ? configuration.idleTimeout
            : min(configuration.idleTimeout, configuration.passivateAfter)
        self.expiryPeriod = min(max(shortest / 4, .milliseconds(10)), .seconds(30))
    }

    /// Starts listening and expiring idle instances.
    public func start() throws {
        try http.start()
        phase.withLock { $0 = .running }
        let service = self.service
        let sweeper = IdleSweeper(period: expiryPeriod) { count in
            service.expireIdleInstances()
            // Stored sessions expire, and are counted, on a slower beat: each a look through
            // the store's index.
            if count % 8 == 0 { service.countStoredSessions() }
            if count % 8 == 7 { service.expireStoredSessions() }
        }
        expiry.withLock { $0 = sweeper }
        logger.info(
            "listening",
            metadata: [
                "port": "\(http.port)", "http-threads": "\(threadCounts.http)",
                "reactor-threads": "\(threadCounts.reactor)",
            ])
    }

    /// The bound port (useful with port 0).
    public var port: UInt16 { http.port }

    /// Stops gracefully: stops accepting, answers in-flight requests, ends every event stream
    /// with its last events and an `end` event, then disposes every instance. A request waiting
    /// for its action (`?wait=true`) is answered as usual if the action finishes within half of
    /// the HTTP server's `shutdownTimeout` (5 s by default), and `202`, as accepted, after that
    /// (see ``ReactorService/answerWaitingRequestsAsAccepted()``). With a store other nodes
    /// share, the instances are first committed and released, and their streams end with
    /// `moved`, so clients resume on another node at once.
    public func shutdown() {
        phase.withLock { $0 = .stopped }
        expiry.withLock { sweeper in
            defer { sweeper = nil }
            return sweeper
        }?.stop()
        // Actions answered 202 so far reach the event streams before those end.
        service.finishQueuedActions(within: .milliseconds(250))
        service.handOffInstances()
        http.shutdown()
        service.disposeAllInstances()
        logger.info("stopped")
    }
}

extension ReactorServer {
    /// Runs the server as a `Service`: starts it (unless `start()` was called already), serves
    /// until the service group shuts down gracefully (or the task is cancelled), then stops as
    /// ``shutdown()`` does and returns. Throws when the server cannot start.
    public func run() async throws {
        let alreadyRunning = phase.withLock { phase -> Bool? in
            switch phase {
            case .idle: return false
            case .running: return true
            case .stopped: return nil
            }
        }
        guard let alreadyRunning else { return }
        if !alreadyRunning { try start() }
        // Returns on graceful shutdown, throws CancellationError on cancellation: either way,
        // stop.
        try? await gracefulShutdown()
        logger.info("stopping")
        // `shutdown()` blocks while requests in flight finish: on a thread of its own, neither on
        // Swift's cooperative threads nor on Dispatch's global queue, whose few threads (one per
        // core) the work it waits for may need.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let stop: @Sendable () -> Void = { [self] in
                shutdown()
                continuation.resume()
            }
            var error: Int32 = 0
            if !startDetachedThread(named: "rs-stop", stop, error: &error) {
                DispatchQueue.global().async(execute: stop)
            }
        }
    }
}
