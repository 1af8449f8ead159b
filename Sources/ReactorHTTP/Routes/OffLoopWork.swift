import Dispatch
import MicroHTTP

// Requests that wait for the session store are served off the event loops, and those whose
// instance another node holds are tried again until it is this node's.

extension ReactorService {
    /// When a request that waits for its instance to become this node's, starting now, gives up
    /// (see ``ReactorServiceConfiguration/ownershipWait``).
    func ownershipDeadlineFromNow() -> UInt64 {
        DispatchTime.now().uptimeNanoseconds &+ configuration.ownershipWait.nanoseconds
    }

    /// Whether a request refused with `problem` waits for its instance to become this node's.
    func waitsForOwnership(after problem: Problem) -> Bool {
        problem.kind == Problem.instanceElsewhereKind && configuration.ownershipWait > .zero && !host.isHandingOff
    }

    /// Runs `handler` on a thread that may wait for the store (`scope` allows it) and answers
    /// through `responder`; or answers `503` when too many requests wait for the store already.
    /// A refusal because another node holds the instance is tried again (see ``retry``) until
    /// `ownershipDeadline`, or for ``ReactorServiceConfiguration/ownershipWait`` from now.
    func serveOffLoop(
        _ request: HTTPRequest, _ scope: RequestScope,
        _ handler: @escaping @Sendable (HTTPRequest, RequestScope) throws -> RouteReply,
        responder: HTTPResponder, ownershipDeadline: UInt64? = nil
    ) {
        storeWork.submit(
            {
                do {
                    switch try handler(request, scope) {
                    case .now(let response): responder.respond(scope.finish(response))
                    case .deferred(let response): responder.respond(response)
                    case .needsStore:
                        // Not expected: off the loops, routes wait for the store themselves.
                        responder.respond(scope.finish(Self.problem(for: StoreWaitRefused()).response))
                    }
                } catch let problem as Problem
                    where self.waitsForOwnership(after: problem)
                    && ownershipDeadline.map({ DispatchTime.now().uptimeNanoseconds < $0 }) ?? true
                {
                    let deadline = ownershipDeadline ?? self.ownershipDeadlineFromNow()
                    self.retry(request, scope, handler, until: deadline, responder: responder)
                } catch {
                    responder.respond(scope.finish(Self.problem(for: error).response))
                }
            },
            refuse: {
                responder.respond(scope.finish(Problem.storeBusy.response))
            })
    }

    /// Serves the request again shortly, off the event loops (see
    /// ``ReactorServiceConfiguration/ownershipWait``), and again while its instance is another
    /// node's, until `deadline`. `scope` may wait for the store.
    func retry(
        _ request: HTTPRequest, _ scope: RequestScope,
        _ handler: @escaping @Sendable (HTTPRequest, RequestScope) throws -> RouteReply,
        until deadline: UInt64, responder: HTTPResponder
    ) {
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) {
            self.serveOffLoop(request, scope, handler, responder: responder, ownershipDeadline: deadline)
        }
    }
}

/// A route asked to be served off the loops where it already was: a fault of the route's.
struct StoreWaitRefused: Error, CustomStringConvertible {
    var description: String { "the route asked for the session store where it may already wait for it" }
}
