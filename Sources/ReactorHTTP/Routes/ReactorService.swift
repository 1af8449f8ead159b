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
    let registry: ReactorHosting.ReactorRegistry
    /// The instances, their lifecycle and their store.
    let host: ReactorHost
    var table: InstanceTable { host.table }
    let metrics: ServiceMetrics
    let logger: Logger
    /// Whether each request is logged (at `debug`): decided once, from the logger's level when
    /// the service is made. Asking the logger on every request cost about 170 instructions
    /// (its handler is copied out of a shared box, with an exclusivity check).
    private let logsEachRequest: Bool
    private let openStreams = Atomic<Int>(0)
    private let requestCount = Atomic<UInt64>(0)
    private let typesJSON: [UInt8]
    private let cors: CrossOriginPolicy
    /// Serves the requests that need the session store, so no event loop waits for it.
    private let storeWork = BlockingWorkPool()

    /// Creates a service serving the registered reactor types.
    public init(registry: ReactorHosting.ReactorRegistry, configuration: ReactorServiceConfiguration = .init(),
                logger: Logger = Logger(label: "reactor-server")) {
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
        hosting.now = configuration.now
        hosting.wallClock = configuration.wallClock
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
        add(&router, .GET, "/types") { _, _ in
            .now(HTTPResponse(status: 200, headers: Self.jsonHeaders, body: self.typesJSON))
        }
        add(&router, .POST, "/reactors") { request, scope in try self.createInstance(request, scope) }
        add(&router, .GET, "/reactors/{id}") { request, scope in .now(try self.readInstance(request, scope)) }
        add(&router, .DELETE, "/reactors/{id}") { request, scope in try self.deleteInstance(request, scope) }
        add(&router, .POST, "/reactors/{id}/actions") { request, scope in try self.sendAction(request, scope) }
        add(&router, .GET, "/reactors/{id}/events") { request, scope in .now(try self.openEvents(request, scope)) }
        add(&router, .GET, "/reactors/{id}/history") { request, scope in .now(try self.readHistory(request, scope)) }
        add(&router, .GET, "/") { _, _ in .now(HTTPResponse(InspectorRoutes.landingPage)) }
        add(&router, .GET, "/inspector") { _, _ in .now(HTTPResponse(InspectorRoutes.inspectorPage)) }
        add(&router, .GET, "/assets/{name}") { request, _ in
            guard let asset = InspectorRoutes.assets[request.pathParameters["name"] ?? ""] else {
                throw Problem.notFound("no asset named \((request.pathParameters["name"] ?? "").prefix(64))")
            }
            return .now(HTTPResponse(asset))
        }
        add(&router, .GET, "/healthz") { _, _ in
            .now(HTTPResponse(status: 200, headers: Self.jsonHeaders, body: Array(#"{"status":"ok"}"#.utf8)))
        }
        add(&router, .GET, "/readyz") { _, _ in
            if let reason = self.host.unreadiness {
                return .now(Problem(status: 503, kind: "not-ready", title: "Not ready",
                                    detail: "this server should not be sent new work now: \(reason)", retryAfter: 1).response)
            }
            return .now(HTTPResponse(status: 200, headers: Self.jsonHeaders, body: Array(#"{"status":"ready"}"#.utf8)))
        }
        add(&router, .GET, "/metrics") { _, _ in
            self.metrics.instanceCount(self.table.count)
            self.metrics.streamCount(self.streamCount)
            self.metrics.requestsWaitingForStore(self.storeWork.pending)
            return .now(HTTPResponse(status: 200, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"],
                                     body: self.metrics.render()))
        }
        router.notFound = { request in
            let scope = RequestScope(service: self, metrics: self.metrics.unmatched(method: request.method),
                                     request: request)
            return scope.finish(Problem.notFound("no route matches \(request.path)").response)
        }
        router.methodNotAllowed = { request, allowed, route in
            // Counted under the route the path matched, with the method it was asked for.
            let scope = RequestScope(service: self, metrics: self.metrics.refused(method: request.method, route: route),
                                     request: request)
            if request.method == .OPTIONS, let preflight = self.cors.preflight(request, allowed: allowed) {
                return scope.finish(preflight)
            }
            let problem = Problem.methodNotAllowed(request.method.rawValue, path: request.path,
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

    /// Disposes every instance, ending their streams, commits what the store has queued, and
    /// lets the threads applying actions end; used when the server stops.
    /// With a store other nodes share, hands every instance over to them (see
    /// ``ReactorServer/shutdown()``); does nothing otherwise.
    public func handOffInstances() {
        host.handOff()
        metrics.instanceCount(table.count)
    }

    public func disposeAllInstances() {
        host.shutdown()
        metrics.instanceCount(0)
    }

    /// Builds replies to errors the HTTP server finds itself (body or headers too large …).
    public func serverErrorResponse(status: Int, detail: String) -> HTTPResponse {
        Problem.serverError(status: status, detail: detail).response
    }

    // MARK: - Routes

    private func createInstance(_ request: HTTPRequest, _ scope: RequestScope) throws -> RouteReply {
        try requireJSON(request)
        let body = try JSONCoding.decodeBody(CreateInstanceRequest.self, from: request.body)
        guard let type = registry.type(named: body.type) else {
            throw Problem.unknownType(body.type, known: registry.names)
        }
        if type.parameters == nil, let parameters = body.parameters, parameters != .null {
            throw Problem(HostingError.invalidParameters("the type '\(type.name)' takes no parameters"))
        }
        let context = CreationContext(idempotencyKey: try Self.idempotencyKey(request), remoteAddress: request.remoteAddress)
        let creation = InstanceCreation(parameters: body.parameters.flatMap { $0 == .null ? nil : JSONCoding.encodeState($0) },
                                        context: context)
        // A new id is checked against the stored ones: off the event loop.
        try leaveTheLoopToWaitForTheStore(scope)
        let (instance, ticket) = try Problem.rethrowing { () throws(HostingError) in try host.create(type, creation: creation) }
        metrics.instanceCount(table.count)
        logger.info("instance created", metadata: ["instance": "\(InstanceID.logLabel(instance.id))", "type": "\(type.name)"])
        return Self.reply(after: ticket, scope) {
            // Not kept with the state: most instances are never read at their first version.
            let state = instance.timeline.latest
            var headers = Self.snapshotHeaders(etag: Self.etag(state.version))
            headers["Location"] = "/reactors/\(instance.id)"
            return HTTPResponse(status: 201, headers: headers, body: Self.snapshotBody(instance, state))
        }
    }

    private func readInstance(_ request: HTTPRequest, _ scope: RequestScope) throws -> HTTPResponse {
        let instance = try self.instance(for: request, scope)
        instance.touch()
        let snapshot = Self.snapshot(instance)
        if let ifNoneMatch = request.headers["If-None-Match"],
           ifNoneMatch.split(separator: ",").contains(where: { $0.trimmingSpaces == snapshot.etag || $0.trimmingSpaces == "*" }) {
            return HTTPResponse(status: 304, headers: ["ETag": snapshot.etag])
        }
        return HTTPResponse(snapshot.response)
    }

    private func deleteInstance(_ request: HTTPRequest, _ scope: RequestScope) throws -> RouteReply {
        // Off the event loop if it is not in memory: the host looks in the store.
        if liveInstance(for: request) == nil { try leaveTheLoopToWaitForTheStore(scope) }
        let id = request.pathParameters["id"] ?? ""
        guard let ticket = try Problem.rethrowing({ () throws(HostingError) in try host.delete(id: id) }) else {
            throw Problem.noSuchInstance(id)
        }
        metrics.instanceCount(table.count)
        logger.info("instance deleted", metadata: ["instance": "\(InstanceID.logLabel(id))"])
        return Self.reply(after: ticket, scope) { HTTPResponse(status: 204) }
    }

    private func sendAction(_ request: HTTPRequest, _ scope: RequestScope) throws -> RouteReply {
        var found = try self.instance(for: request, scope)
        try requireJSON(request)
        let wait = try Self.flag(request.query["wait"], name: "wait")
        let key = try Self.idempotencyKey(request)
        found.touch()
        func send(to instance: any HostedInstance) throws(HostingError) -> (ActionReceipt, CommitTicket?, Bool) {
            let trace = startTrace(request, on: instance)
            guard let key else {
                let (receipt, ticket) = try instance.send(actionJSON: request.body, trace: trace)
                return (receipt, ticket, false)
            }
            return try instance.send(actionJSON: request.body, trace: trace, idempotencyKey: key)
        }
        let receipt: ActionReceipt
        let ticket: CommitTicket?
        let isReplay: Bool
        do {
            (receipt, ticket, isReplay) = try send(to: found)
        } catch .instanceEnded where configuration.store != nil {
            // It left memory as this request found it: once more, on the instance brought back.
            found = try self.instance(for: request, scope)
            let again = found
            (receipt, ticket, isReplay) = try Problem.rethrowing { () throws(HostingError) in try send(to: again) }
        } catch {
            throw Problem(error)
        }
        let instance = found
        if isReplay { metrics.actionReplayed() } else { metrics.actionAccepted() }
        guard wait else {
            return Self.reply(after: ticket, scope) {
                Self.marked(HTTPResponse(status: 202, headers: Self.jsonHeaders, body: Self.receiptJSON(receipt)), isReplay)
            }
        }
        let timeout = configuration.waitTimeout
        return .deferred(HTTPResponse.deferred { responder in
            let reply = ReplyOnce(responder: responder, scope: scope)
            instance.whenSettled(receipt) {
                reply.send(Self.marked(HTTPResponse(Self.snapshot(instance).response), isReplay))
            }
            // Whichever comes first answers; the later one is ignored. The 202 still waits for
            // the action's commit.
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: timeout.nanoseconds))) {
                let accepted = Self.marked(HTTPResponse(status: 202, headers: Self.jsonHeaders, body: Self.receiptJSON(receipt)), isReplay)
                guard let ticket else { return reply.send(accepted) }
                ticket.whenCommitted { outcome in reply.send(outcome == .committed ? accepted : Self.notCommitted(outcome)) }
            }
        })
    }

    /// The span of the action `request` sends to `instance`, continuing the trace its headers
    /// name (`traceparent`, as the tracer reads them); nil when nothing is traced.
    private func startTrace(_ request: HTTPRequest, on instance: any HostedInstance) -> (any Span)? {
        instance.traces?.startAction(continuing: request.headers, using: HTTPHeadersExtractor())
    }

    /// `make`'s response now, or once `ticket`'s write is committed.
    private static func reply(after ticket: CommitTicket?, _ scope: RequestScope,
                              _ make: @escaping @Sendable () -> HTTPResponse) -> RouteReply {
        guard let ticket else { return .now(make()) }
        return .deferred(HTTPResponse.deferred { responder in
            let reply = ReplyOnce(responder: responder, scope: scope)
            ticket.whenCommitted { outcome in reply.send(outcome == .committed ? make() : Self.notCommitted(outcome)) }
        })
    }

    /// The answer when the store did not commit what a request did: it was not accepted.
    private static func notCommitted(_ outcome: CommitOutcome) -> HTTPResponse {
        outcome == .overtaken ? overtaken.response : commitFailed.response
    }

    private static let commitFailed = Problem(HostingError.storeUnavailable(
        "the session store failed to commit this request (see the server's log)"))
    /// Another node claimed the instance while the request's write was being committed.
    private static let overtaken = Problem(HostingError.ownedElsewhere(retryAfterSeconds: 1))

    private func openEvents(_ request: HTTPRequest, _ scope: RequestScope) throws -> HTTPResponse {
        let instance = try self.instance(for: request, scope)
        let lastEventID = try Self.lastEventID(request)
        let format = try Self.eventFormat(request.query["format"])
        let headers: HTTPHeaders = [
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        ]
        if request.method == .HEAD { return HTTPResponse(status: 200, headers: headers) }
        let limit = configuration.maxStreams
        guard openStreams.wrappingAdd(1, ordering: .relaxed).oldValue < limit else {
            openStreams.wrappingSubtract(1, ordering: .relaxed)
            throw Problem.tooManyStreams(limit: limit, perInstance: false)
        }
        var onWrite: (@Sendable (UInt64) -> Void)?
        if let traces = instance.traces { onWrite = { traces.wrote(version: $0) } }
        let subscriber = EventSubscriber(
            timeline: instance.timeline, resumingAfter: lastEventID, format: format,
            retryMilliseconds: configuration.retryMilliseconds, onWrite: onWrite
        ) {
            self.openStreams.wrappingSubtract(1, ordering: .relaxed)
            instance.touch()
        }
        do {
            try Problem.rethrowing { () throws(HostingError) in try instance.timeline.attach(subscriber) }
        } catch {
            openStreams.wrappingSubtract(1, ordering: .relaxed)
            throw error
        }
        instance.touch()
        return .stream(status: 200, headers: headers, source: subscriber,
                       heartbeat: HTTPHeartbeat(interval: configuration.heartbeatInterval,
                                                bytes: ServerSentEvents.heartbeat))
    }

    private func readHistory(_ request: HTTPRequest, _ scope: RequestScope) throws -> HTTPResponse {
        let instance = try self.instance(for: request, scope)
        let after = try request.query["after"].map { (raw) throws(Problem) in try Self.version(raw, name: "after") }
        instance.touch()
        let latest = instance.timeline.latest.version
        let history = instance.timeline.history(after: after)
        var headers = Self.jsonHeaders
        headers["Cache-Control"] = "no-store"
        return HTTPResponse(status: 200, headers: headers,
                            body: InstanceHistory.body(id: instance.id, type: instance.typeName, history: history, latest: latest))
    }

    // MARK: - Helpers

    /// The instance the request's path names. One not in memory is brought back from the store
    /// only where `scope` may wait for the store; elsewhere (an event loop) this throws
    /// ``StoreWaitNeeded`` and the request is served again off the loop. Else throws a `Problem`.
    private func instance(for request: HTTPRequest, _ scope: RequestScope) throws -> any HostedInstance {
        if let live = liveInstance(for: request) { return live }
        try leaveTheLoopToWaitForTheStore(scope)
        let id = request.pathParameters["id"] ?? ""
        // Not in memory: the store may hold it (activated here), or nothing does.
        let found = try Problem.rethrowing { () throws(HostingError) in try host.instance(id: id) }
        guard let found else { throw Problem.noSuchInstance(id) }
        return found
    }

    /// The instance the `{id}` path parameter names, when it is in memory. An id as it is always
    /// sent (its alphabet needs no escapes) is looked up from the path's own bytes; anything
    /// else is left to the caller, which decodes it first.
    private func liveInstance(for request: HTTPRequest) -> (any HostedInstance)? {
        var key: InstanceKey?
        request.pathParameters.withRawValue(of: "id") { raw in key = InstanceKey(utf8: raw) }
        return key.flatMap(table.instance(key:))
    }

    /// Throws ``StoreWaitNeeded`` on an event loop when there is a store: what the caller does
    /// next may wait for it, so the request is served again off the loop. Without a store,
    /// every request is served on its loop.
    private func leaveTheLoopToWaitForTheStore(_ scope: RequestScope) throws {
        if configuration.store != nil && !scope.mayWaitForStore { throw StoreWaitNeeded() }
    }

    private func requireJSON(_ request: HTTPRequest) throws(Problem) {
        guard let contentType = request.headers["Content-Type"],
              contentType != "application/json" else { return }
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingSpaces.lowercased() } ?? ""
        let accepted = mediaType.isEmpty || mediaType == "application/json" || mediaType.hasSuffix("+json")
            || mediaType == "application/x-www-form-urlencoded"
        guard accepted else { throw Problem.unsupportedMediaType(contentType) }
    }

    /// `response`, marked `Idempotent-Replayed: true` when it answers a retry of an action
    /// already sent (the first attempt's answer).
    private static func marked(_ response: HTTPResponse, _ isReplay: Bool) -> HTTPResponse {
        guard isReplay else { return response }
        var response = response
        response.headers["Idempotent-Replayed"] = "true"
        return response
    }

    /// The request's `Idempotency-Key`, unquoted (a structured-field string, `"…"`, or bare);
    /// nil when there is none. Refuses one that is not 1 to 255 visible ASCII characters.
    static func idempotencyKey(_ request: HTTPRequest) throws(Problem) -> String? {
        guard var key = request.headers["Idempotency-Key"]?.trimmingSpaces else { return nil }
        if key.utf8.count >= 2, key.hasPrefix("\""), key.hasSuffix("\"") { key = String(key.dropFirst().dropLast()) }
        guard RememberedKey.isValid(key) else {
            throw Problem.invalidParameter("Idempotency-Key must be 1 to 255 visible ASCII characters, without spaces")
        }
        return key
    }

    /// The version a stream resumes after: the `Last-Event-ID` header's, else `?lastEventId=`'s.
    /// Each that is given must be digits only (`lastEventId` also when the header wins); an
    /// empty header counts as absent (a client that has seen no event yet may send one).
    static func lastEventID(_ request: HTTPRequest) throws(Problem) -> UInt64? {
        let query = try request.query["lastEventId"].map { (raw) throws(Problem) in try version(raw, name: "lastEventId") }
        if let header = request.headers["Last-Event-ID"]?.trimmingSpaces, !header.isEmpty {
            return try version(header, name: "Last-Event-ID")
        }
        return query
    }

    /// A state version given as `name` (a header or query parameter): digits only.
    static func version(_ text: String, name: String) throws(Problem) -> UInt64 {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              let version = UInt64(text) else {
            throw Problem.invalidParameter("\(name) must be a state version (a non-negative integer), not '\(text.prefix(64))'")
        }
        return version
    }

    /// `?format=`: `state` (whole states, the default) or `patch` (RFC 6902 patches).
    static func eventFormat(_ raw: String?) throws(Problem) -> EventFormat {
        switch raw {
        case nil, "state": return .states
        case "patch": return .patches
        case let other?:
            throw Problem.invalidParameter("format must be state or patch, not '\(other.prefix(64))'")
        }
    }

    static func flag(_ raw: String?, name: String) throws(Problem) -> Bool {
        switch raw?.lowercased() {
        case nil, "false", "0", "no": return false
        case "", "true", "1", "yes": return true
        case let other?:
            throw Problem.invalidParameter("\(name) must be true or false, not '\(other.prefix(64))'")
        }
    }

    static let jsonHeaders: HTTPHeaders = ["Content-Type": "application/json"]

    /// `path` as logs may show it: an instance id in it (`/reactors/{id}…`) replaced by its short
    /// hash, since the id is its owner's only credential.
    static func loggable(path: String) -> String {
        var segments = path.split(separator: "/", omittingEmptySubsequences: false)
        guard segments.count >= 3, segments[1] == "reactors", !segments[2].isEmpty else { return path }
        segments[2] = Substring(InstanceID.logLabel(String(segments[2])))
        return segments.joined(separator: "/")
    }

    static func etag(_ version: UInt64) -> String { "\"\(version)\"" }

    /// The instance's snapshot at its latest version, built once per version.
    static func snapshot(_ instance: any HostedInstance) -> InstanceSnapshot {
        instance.timeline.latestSnapshot { state in
            let etag = etag(state.version)
            let response = PreparedResponse(status: 200, headers: snapshotHeaders(etag: etag),
                                            body: snapshotBody(instance, state))
            return InstanceSnapshot(version: state.version, etag: etag, response: response)
        }
    }

    /// `{"id":…,"state":…,"type":…,"version":…}` with the shared state bytes spliced in.
    static func snapshotBody(_ instance: any HostedInstance, _ state: any VersionedState) -> [UInt8] {
        let json = state.json
        var object = JSONObjectWriter(capacity: json.count + 96)
        object.add("id", string: instance.id)
        object.add("state", json: json)
        object.add("type", string: instance.typeName)
        object.add("version", raw: String(state.version))
        return object.finish()
    }

    /// `Content-Type` and `ETag`.
    static func snapshotHeaders(etag: String) -> HTTPHeaders {
        var headers = jsonHeaders
        headers["ETag"] = etag
        return headers
    }

    /// `{"seq":N}` in one allocation of its final size.
    static func receiptJSON(_ receipt: ActionReceipt) -> [UInt8] {
        let head = #"{"seq":"#.utf8
        var bytes: [UInt8] = []
        bytes.reserveCapacity(head.count + JSONText.decimalDigitCount(of: receipt.sequence) + 1)
        bytes.append(contentsOf: head)
        JSONText.appendInteger(receipt.sequence, to: &bytes)
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    // MARK: - Instrumentation

    private func add(_ router: inout Router, _ method: HTTPMethod, _ pattern: String,
                     _ handler: @escaping @Sendable (HTTPRequest, RequestScope) throws -> RouteReply) {
        let routeMetrics = metrics.route(pattern, method: method.rawValue)
        router.add(method, pattern) { request in
            let scope = RequestScope(service: self, metrics: routeMetrics, request: request)
            do {
                switch try handler(request, scope) {
                case .now(let response): return scope.finish(response)
                case .deferred(let response): return response
                }
            } catch is StoreWaitNeeded {
                return HTTPResponse.deferred { responder in
                    self.serveOffLoop(request, scope.waitingForStore(), handler, responder: responder)
                }
            } catch let problem as Problem where self.waitsForOwnership(after: problem) {
                let deadline = self.ownershipDeadlineFromNow()
                return HTTPResponse.deferred { responder in
                    self.retry(request, scope.waitingForStore(), handler, until: deadline, responder: responder)
                }
            } catch {
                return scope.finish(Self.problem(for: error).response)
            }
        }
    }

    /// When a request that waits for its instance to become this node's, starting now, gives up
    /// (see ``ReactorServiceConfiguration/ownershipWait``).
    private func ownershipDeadlineFromNow() -> UInt64 {
        DispatchTime.now().uptimeNanoseconds &+ configuration.ownershipWait.nanoseconds
    }

    /// Whether a request refused with `problem` waits for its instance to become this node's.
    private func waitsForOwnership(after problem: Problem) -> Bool {
        problem.kind == Problem.instanceElsewhereKind && configuration.ownershipWait > .zero && !host.isHandingOff
    }

    /// Runs `handler` on a thread that may wait for the store (`scope` allows it) and answers
    /// through `responder`; or answers `503` when too many requests wait for the store already.
    /// A refusal because another node holds the instance is tried again (see ``retry``) until
    /// `ownershipDeadline`, or for ``ReactorServiceConfiguration/ownershipWait`` from now.
    private func serveOffLoop(_ request: HTTPRequest, _ scope: RequestScope,
                              _ handler: @escaping @Sendable (HTTPRequest, RequestScope) throws -> RouteReply,
                              responder: HTTPResponder, ownershipDeadline: UInt64? = nil) {
        storeWork.submit({
            do {
                switch try handler(request, scope) {
                case .now(let response): responder.respond(scope.finish(response))
                case .deferred(let response): responder.respond(response)
                }
            } catch let problem as Problem where self.waitsForOwnership(after: problem)
                && ownershipDeadline.map({ DispatchTime.now().uptimeNanoseconds < $0 }) ?? true {
                let deadline = ownershipDeadline ?? self.ownershipDeadlineFromNow()
                self.retry(request, scope, handler, until: deadline, responder: responder)
            } catch {
                responder.respond(scope.finish(Self.problem(for: error).response))
            }
        }, refuse: {
            responder.respond(scope.finish(Problem.storeBusy.response))
        })
    }

    /// Serves the request again shortly, off the event loops (see
    /// ``ReactorServiceConfiguration/ownershipWait``), and again while its instance is another
    /// node's, until `deadline`. `scope` may wait for the store.
    private func retry(_ request: HTTPRequest, _ scope: RequestScope,
                       _ handler: @escaping @Sendable (HTTPRequest, RequestScope) throws -> RouteReply,
                       until deadline: UInt64, responder: HTTPResponder) {
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) {
            self.serveOffLoop(request, scope, handler, responder: responder, ownershipDeadline: deadline)
        }
    }

    /// The problem to answer for an error a route threw.
    private static func problem(for error: any Error) -> Problem {
        (error as? Problem) ?? Problem(status: 500, kind: "internal", title: "Internal Server Error", detail: "\(error)")
    }

    fileprivate func finish(_ response: consuming HTTPResponse, scope: RequestScope) -> HTTPResponse {
        var response = response
        cors.decorate(&response, for: scope.request)
        let elapsed = DispatchTime.now().uptimeNanoseconds &- scope.started
        scope.metrics.requestFinished(status: response.status, nanoseconds: Int64(clamping: elapsed))
        if logsEachRequest {
            // Numbered only when logged: a counter shared by every worker thread costs a
            // contended cache line per request.
            let requestID = requestCount.wrappingAdd(1, ordering: .relaxed).newValue
            logger.debug("request", metadata: [
                "request-id": "\(requestID)",
                "method": "\(scope.request.method.rawValue)",
                "path": "\(Self.loggable(path: scope.request.path))",
                "status": "\(response.status)",
                "micros": "\(elapsed / 1000)",
            ])
        }
        return response
    }
}

/// Thrown on an event loop by a route that would have to wait for the session store: the
/// service serves the request again off the loop (see ``RequestScope/mayWaitForStore``).
struct StoreWaitNeeded: Error {}

/// What a route answers: a response now, or one whose completion the route took over.
enum RouteReply: Sendable {
    case now(HTTPResponse)
    /// A deferred response that calls `RequestScope.finish` itself when it completes.
    case deferred(HTTPResponse)
}

/// One request as the service's instrumentation sees it.
struct RequestScope: Sendable {
    let service: ReactorService
    let metrics: RouteMetrics
    let request: HTTPRequest
    let started: UInt64
    /// Whether the request is served where it may wait for the session store (off the event
    /// loops): only then is an instance brought back from the store or a new id checked.
    private(set) var mayWaitForStore = false

    init(service: ReactorService, metrics: RouteMetrics, request: HTTPRequest) {
        self.service = service
        self.metrics = metrics
        self.request = request
        self.started = DispatchTime.now().uptimeNanoseconds
    }

    /// The same request, served where it may wait for the store.
    func waitingForStore() -> RequestScope {
        var scope = self
        scope.mayWaitForStore = true
        return scope
    }

    /// Adds CORS headers, records metrics and logs; returns the response to send.
    func finish(_ response: consuming HTTPResponse) -> HTTPResponse {
        service.finish(response, scope: self)
    }
}

/// Sends one deferred reply, whichever of its racing causes (settled or timed out) comes first.
final class ReplyOnce: Sendable {
    private let responder: HTTPResponder
    private let scope: RequestScope
    private let sent = Atomic<Bool>(false)

    init(responder: HTTPResponder, scope: RequestScope) {
        self.responder = responder
        self.scope = scope
    }

    func send(_ response: HTTPResponse) {
        guard !sent.exchange(true, ordering: .acquiringAndReleasing) else { return }
        responder.respond(scope.finish(response))
    }
}

/// The JSON body of `POST /reactors`: `{"type":…}`, with `"parameters"` for a type registered
/// with parameters, and nothing else (a field the server does not know is refused rather than
/// ignored, as openapi.yaml's `additionalProperties: false` says).
struct CreateInstanceRequest: Decodable {
    let type: String
    let parameters: JSONValue?

    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        if let unknown = container.allKeys.map(\.stringValue).sorted().first(where: { $0 != "type" && $0 != "parameters" }) {
            throw DecodingError.dataCorruptedError(
                forKey: Key(stringValue: unknown), in: container,
                debugDescription: "unknown field '\(unknown.prefix(64))' (a creation names its 'type' and, for a type that takes them, its 'parameters')")
        }
        type = try container.decode(String.self, forKey: Key(stringValue: "type"))
        parameters = try container.decodeIfPresent(JSONValue.self, forKey: Key(stringValue: "parameters"))
    }
}

/// Reads trace context (`traceparent`, `tracestate`, …) from request headers.
struct HTTPHeadersExtractor: Extractor {
    func extract(key: String, from headers: HTTPHeaders) -> String? { headers[key] }
}

extension Substring {
    /// The text without leading and trailing spaces and tabs.
    var trimmingSpaces: String {
        let utf8 = self.utf8
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 }
        guard let first = utf8.firstIndex(where: { !isSpace($0) }),
              let last = utf8.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(decoding: utf8[first...last], as: UTF8.self)
    }
}

extension String {
    /// The text without leading and trailing spaces and tabs.
    var trimmingSpaces: String { self[...].trimmingSpaces }
}
