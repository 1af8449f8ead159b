import Dispatch
import Logging
import MicroHTTP
import ReactorHosting

// Around every route: metrics, CORS, the request log, and the refusals routes throw.

extension ReactorService {
    /// Adds a route for callers with `access` (see ``RouteAccess``): authenticated first, when
    /// the service authenticates.
    func add(
        _ router: inout Router, _ method: HTTPMethod, _ pattern: String, access: RouteAccess = .subject,
        _ handler: @escaping @Sendable (HTTPRequest, RequestScope) throws -> RouteReply
    ) {
        let routeMetrics = metrics.route(pattern, method: method.rawValue)
        // Decided once: a service that authenticates nobody pays nothing per request for it.
        let authenticates = access != .open && configuration.authentication != nil
        router.add(method, pattern) { request in
            var scope = RequestScope(service: self, metrics: routeMetrics, request: request)
            if authenticates {
                do throws(Problem) {
                    scope = scope.sentBy(try self.caller(of: request, for: access))
                } catch {
                    return scope.finish(error.response)
                }
            }
            return self.serve(request, scope, handler)
        }
    }

    /// Runs `handler` for `request` and turns what it answers into the response.
    private func serve(
        _ request: HTTPRequest, _ scope: RequestScope,
        _ handler: @escaping @Sendable (HTTPRequest, RequestScope) throws -> RouteReply
    ) -> HTTPResponse {
        do {
            switch try handler(request, scope) {
            case .now(let response): return scope.finish(response)
            case .deferred(let response): return response
            case .needsStore:
                return HTTPResponse.deferred { responder in
                    self.serveOffLoop(request, scope.waitingForStore(), handler, responder: responder)
                }
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

    /// The problem to answer for an error a route threw.
    static func problem(for error: any Error) -> Problem {
        (error as? Problem) ?? Problem(status: 500, kind: "internal", title: "Internal Server Error", detail: "\(error)")
    }

    func finish(_ response: consuming HTTPResponse, scope: RequestScope) -> HTTPResponse {
        var response = response
        cors.decorate(&response, for: scope.request)
        let elapsed = DispatchTime.now().uptimeNanoseconds &- scope.started
        scope.metrics.requestFinished(status: response.status, nanoseconds: Int64(clamping: elapsed))
        if logsEachRequest {
            // Numbered only when logged: a counter shared by every worker thread costs a
            // contended cache line per request.
            let requestID = requestCount.wrappingAdd(1, ordering: .relaxed).newValue
            logger.debug(
                "request",
                metadata: [
                    "request-id": "\(requestID)",
                    "method": "\(scope.request.method.rawValue)",
                    "path": "\(Self.loggable(path: scope.request.path))",
                    "status": "\(response.status)",
                    "micros": "\(elapsed / 1000)",
                ])
        }
        return response
    }

    /// `path` as logs may show it, with no instance id in it whole, since an id is its owner's
    /// only credential: the segment after `reactors`, and every segment as long as an id or
    /// longer wherever it stands, are replaced by their short hash. So an id stays hidden in any
    /// form a client sends it, routed or not: `//reactors/{id}`, `/%72eactors/{id}`, an id
    /// percent-encoded, an absolute URL. Shorter segments are shown as sent.
    static func loggable(path: String) -> String {
        var segments = path.split(separator: "/", omittingEmptySubsequences: false)
        var hidden = false
        var afterReactors = false
        for index in segments.indices {
            let segment = segments[index]
            if !segment.isEmpty, afterReactors || segment.utf8.count >= InstanceID.length {
                segments[index] = Substring(InstanceID.logLabel(String(segment)))
                hidden = true
            }
            afterReactors = segment == "reactors"
        }
        return hidden ? segments.joined(separator: "/") : path
    }
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
    /// Who sent it (``Caller/anyone`` when the service authenticates nobody).
    private(set) var caller = Caller.anyone

    init(service: ReactorService, metrics: RouteMetrics, request: HTTPRequest) {
        self.service = service
        self.metrics = metrics
        self.request = request
        self.started = DispatchTime.now().uptimeNanoseconds
    }

    /// The same request, sent by `caller`.
    func sentBy(_ caller: Caller) -> RequestScope {
        var scope = self
        scope.caller = caller
        return scope
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
