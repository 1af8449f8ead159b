import Dispatch
import Logging
import MicroHTTP
import ReactorCore
import ReactorHosting
import SortedJSON
import Synchronization
import Tracing

/// The reactor service: one reactor instance per client session, actions in over
/// `POST /reactors/{id}/actions`, states out as server-sent events. It builds a `Router`
/// for any `HTTPServer`; `ReactorServer` puts the two together.
public final class ReactorService: Sendable {
    /// The limits and behaviour in force.
    public let configuration: ReactorServiceConfiguration
    let registry: ReactorRegistry
    /// The instances, their lifecycle and their store.
    let host: ReactorHost
    var table: InstanceTable { host.table }
    let metrics: ServiceMetrics
    let logger: Logger
    /// Whether each request is logged (at `debug`): decided once, from the logger's level when
    /// the service is made. Asking the logger on every request cost about 170 instructions
    /// (its handler is copied out of a shared box, with an exclusivity check).
    let logsEachRequest: Bool
    let openStreams = Atomic<Int>(0)
    let requestCount = Atomic<UInt64>(0)
    let typesJSON: [UInt8]
    let cors: CrossOriginPolicy
    /// Serves the requests that need the session store, so no event loop waits for it.
    let storeWork = BlockingWorkPool()
    /// The `?wait=true` requests not yet answered, for a stop to answer.
    let waitingRequests = WaitingRequests()

    /// Creates a service serving the registered reactor types.
    public init(
        registry: ReactorRegistry, configuration: ReactorServiceConfiguration = .init(),
        logger: Logger = Logger(label: "reactor-server")
    ) {
        self.registry = registry
        self.configuration = configuration
        self.logger = logger
        self.logsEachRequest = logger.logLevel <= .debug
        self.cors = CrossOriginPolicy(allowedOrigins: configuration.allowedOrigins)
        self.metrics = ServiceMetrics(hasStore: configuration.store != nil)
        var hosting = HostingConfiguration()
        hosting.maxInstances = configuration.maxInstances
        hosting.historyCapacity = configuration.historyCapacity
        hosting.subscriberLimit = configuration.maxStreamsPerInstance
        hosting.idleTimeout = configuration.idleTimeout
        hosting.passivateAfter = configuration.passivateAfter
        hosting.reactorThreads = configuration.reactorThreads
        hosting.stallTimeout = configuration.stallTimeout
        hosting.store = configuration.store
        hosting.durability = configuration.durability
        hosting.stopGrace = configuration.stopGrace
        hosting.now = configuration.now
        hosting.wallClock = configuration.wallClock
        if configuration.authentication != nil { hosting.maxInstancesPerSubject = configuration.maxInstancesPerSubject }
        hosting.tracer = configuration.tracer ?? Self.bootstrappedTracer
        if let storeObserver = metrics.storeObserver { hosting.storeObserver = storeObserver }
        let metrics = self.metrics
        self.host = ReactorHost(
            registry: registry, configuration: hosting, logger: logger,
            errorEvent: { ServerSentEvents.event("error", json: Problem.mutationFailedJSON($0)) },
            stallChanged: { metrics.instanceStalled($0) },
            mutationFailed: { metrics.mutationFailed() })
        var types = JSONObjectWriter()
        types.add("types", json: JSONText.array(registry.allTypes.map(\.json)))
        self.typesJSON = types.finish()
    }

    /// The tracer the process bootstrapped (`InstrumentationSystem`), unless it is the no-op one.
    private static var bootstrappedTracer: (any Tracer)? {
        let tracer = InstrumentationSystem.tracer
        return tracer is NoOpTracer ? nil : tracer
    }

    /// How many instances are live.
    public var instanceCount: Int { table.count }

    /// How many instances are stalled: inside a `mutate`, `reduce` or transform that has not
    /// returned within the stall timeout.
    public var stalledInstanceCount: Int { metrics.stalledInstanceCount }

    /// How many event streams are open.
    public var streamCount: Int { openStreams.load(ordering: .relaxed) }

    /// The service's routes, with problem+json answers for unknown routes and methods.
    public func makeRouter() -> Router {
        var router = Router()
        add(&router, .GET, "/types", access: .open) { _, _ in
            .now(HTTPResponse(status: 200, headers: Self.jsonHeaders, body: self.typesJSON))
        }
        add(&router, .POST, "/reactors") { request, scope in try self.createInstance(request, scope) }
        add(&router, .GET, "/reactors/{id}") { request, scope in try self.readInstance(request, scope) }
        add(&router, .DELETE, "/reactors/{id}") { request, scope in try self.deleteInstance(request, scope) }
        add(&router, .POST, "/reactors/{id}/actions") { request, scope in try self.sendAction(request, scope) }
        add(&router, .GET, "/reactors/{id}/events") { request, scope in try self.openEvents(request, scope) }
        add(&router, .GET, "/reactors/{id}/history", access: .admin) { request, scope in try self.readHistory(request, scope) }
        add(&router, .GET, "/", access: .open) { _, _ in .now(HTTPResponse(InspectorRoutes.landingPage)) }
        add(&router, .GET, "/inspector", access: .open) { _, _ in .now(HTTPResponse(InspectorRoutes.inspectorPage)) }
        add(&router, .GET, "/assets/{name}", access: .open) { request, _ in
            guard let asset = InspectorRoutes.assets[request.pathParameters["name"] ?? ""] else {
                throw Problem.notFound("no asset named \((request.pathParameters["name"] ?? "").prefix(64))")
            }
            return .now(HTTPResponse(asset))
        }
        add(&router, .GET, "/healthz", access: .open) { _, _ in
            .now(HTTPResponse(status: 200, headers: Self.jsonHeaders, body: Array(#"{"status":"ok"}"#.utf8)))
        }
        add(&router, .GET, "/readyz", access: .open) { _, _ in
            if let reason = self.host.unreadiness {
                return .now(
                    Problem(
                        status: 503, kind: "not-ready", title: "Not ready",
                        detail: "this server should not be sent new work now: \(reason)", retryAfter: 1
                    ).response)
            }
            return .now(HTTPResponse(status: 200, headers: Self.jsonHeaders, body: Array(#"{"status":"ready"}"#.utf8)))
        }
        add(&router, .GET, "/metrics", access: .admin) { _, _ in
            self.metrics.instanceCount(self.table.count)
            self.metrics.streamCount(self.streamCount)
            self.metrics.requestsWaitingForStore(self.storeWork.pending)
            return .now(
                HTTPResponse(
                    status: 200, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"],
                    body: self.metrics.render()))
        }
        router.notFound = { request in
            let scope = RequestScope(
                service: self, metrics: self.metrics.unmatched(method: request.method),
                request: request)
            return scope.finish(Problem.notFound("no route matches \(request.path)").response)
        }
        router.methodNotAllowed = { request, allowed, route in
            // Counted under the route the path matched, with the method it was asked for.
            let scope = RequestScope(
                service: self, metrics: self.metrics.refused(method: request.method, route: route),
                request: request)
            if request.method == .OPTIONS, let preflight = self.cors.preflight(request, allowed: allowed) {
                return scope.finish(preflight)
            }
            let problem = Problem.methodNotAllowed(
                request.method.rawValue, path: request.path,
                allowed: allowed.map(\.rawValue))
            return scope.finish(problem.response)
        }
        return router
    }

    /// Disposes instances idle for longer than the idle timeout with no open event stream
    /// (deleting them from the store too), and takes those idle past the passivation time out
    /// of memory (they stay in the store).
    /// - Returns: how many were disposed.
    @discardableResult
    public func expireIdleInstances() -> Int {
        let expired = host.expireIdle()
        for instance in expired {
            logger.info("instance expired", metadata: ["instance": "\(InstanceID.logLabel(instance.id))", "type": "\(instance.typeName)"])
        }
        let passivated = host.passivateIdle()
        if passivated > 0 { logger.debug("instances left memory", metadata: ["count": "\(passivated)"]) }
        if !expired.isEmpty || passivated > 0 { metrics.instanceCount(table.count) }
        return expired.count
    }

    /// Deletes stored sessions idle past the idle timeout that are not in memory.
    /// - Returns: how many were deleted.
    @discardableResult
    public func expireStoredSessions() -> Int { host.expireStoredSessions() }

    /// Counts the stored sessions for `reactor_store_sessions`.
    public func countStoredSessions() { host.countStoredSessions() }

    /// Waits until every action queued so far is applied (stalled instances aside), or
    /// `timeout` passed.
    public func finishQueuedActions(within timeout: Duration) {
        host.finishQueuedActions(within: timeout)
    }

    /// Answers every `?wait=true` request still waiting as a request without the wait is
    /// answered (`202` with the action's sequence number, once its record is committed), and
    /// each one that comes later at once. For a stop that will wait no longer for the actions
    /// (``ReactorServer`` calls it through `HTTPServerConfiguration.beforeRefusingPendingReplies`):
    /// the actions were accepted, so the clients are told so, where the HTTP server would refuse
    /// the requests still pending, and a client that then sent one again would have its action
    /// applied twice.
    public func answerWaitingRequestsAsAccepted() {
        waitingRequests.answerAllAsAccepted()
    }

    /// With a store other nodes share, hands every instance over to them (see
    /// ``ReactorServer/shutdown()``); does nothing otherwise.
    public func handOffInstances() {
        host.handOff()
        metrics.instanceCount(table.count)
    }

    /// Disposes every instance, ending their streams, commits what the store has queued, and
    /// lets the threads applying actions end; used when the server stops.
    public func disposeAllInstances() {
        host.shutdown()
        metrics.instanceCount(0)
    }

    /// Builds replies to errors the HTTP server finds itself (body or headers too large …).
    public func serverErrorResponse(status: Int, detail: String) -> HTTPResponse {
        Problem.serverError(status: status, detail: detail).response
    }
}
