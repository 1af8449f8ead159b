import Dispatch
import MicroHTTP
import ReactorCore
import ReactorHosting
import Tracing

// The routes on `/reactors`: create, read, delete, send an action, stream the states, read the history.

extension ReactorService {
    func createInstance(_ request: HTTPRequest, _ scope: RequestScope) throws -> RouteReply {
        try requireJSON(request)
        let body = try JSONCoding.decodeBody(CreateInstanceRequest.self, from: request.body)
        guard let type = registry.type(named: body.type) else {
            throw Problem.unknownType(body.type, known: registry.names)
        }
        if type.parameters == nil, let parameters = body.parameters, parameters != .null {
            throw Problem(HostingError.invalidParameters("the type '\(type.name)' takes no parameters"))
        }
        if configuration.authentication != nil, scope.caller.subject == nil {
            throw Problem.forbidden(
                "the admin token creates no sessions: a session belongs to a subject, so create it with a subject's token")
        }
        let context = CreationContext(
            idempotencyKey: try Self.idempotencyKey(request), remoteAddress: request.remoteAddress, subject: scope.caller.subject)
        let creation = InstanceCreation(
            parameters: body.parameters.flatMap { $0 == .null ? nil : JSONCoding.encodeState($0) },
            context: context)
        // A new id is checked against the stored ones: off the event loop.
        if needsStoreOffLoop(scope) { return .needsStore }
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

    func readInstance(_ request: HTTPRequest, _ scope: RequestScope) throws -> RouteReply {
        guard let instance = try self.instance(for: request, scope) else { return .needsStore }
        instance.touch()
        let snapshot = Self.snapshot(instance)
        if let ifNoneMatch = request.headers["If-None-Match"],
            ifNoneMatch.split(separator: ",").contains(where: { Self.matches($0.trimmingSpaces, snapshot.etag) })
        {
            return .now(HTTPResponse(status: 304, headers: ["ETag": snapshot.etag]))
        }
        return .now(HTTPResponse(snapshot.response))
    }

    func deleteInstance(_ request: HTTPRequest, _ scope: RequestScope) throws -> RouteReply {
        // Off the event loop if it is not in memory: the host looks in the store.
        if liveInstance(for: request) == nil && needsStoreOffLoop(scope) { return .needsStore }
        let id = request.pathParameters["id"] ?? ""
        let caller = scope.caller
        let deleted = try Problem.rethrowing { () throws(HostingError) in
            try host.delete(id: id, mayDelete: caller.mayReach, mayDeleteUnread: caller.isAdmin)
        }
        guard let ticket = deleted else {
            throw Problem.noSuchInstance(id)
        }
        metrics.instanceCount(table.count)
        logger.info("instance deleted", metadata: ["instance": "\(InstanceID.logLabel(id))"])
        return Self.reply(after: ticket, scope) { HTTPResponse(status: 204) }
    }

    func sendAction(_ request: HTTPRequest, _ scope: RequestScope) throws -> RouteReply {
        guard var found = try self.instance(for: request, scope) else { return .needsStore }
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
            // It left memory as this request found it (nothing was sent): once more, on the
            // instance brought back.
            guard let brought = try self.instance(for: request, scope) else { return .needsStore }
            found = brought
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
        return .deferred(
            HTTPResponse.deferred { responder in
                let waitingRequests = self.waitingRequests
                let reply = ReplyOnce(responder: responder, scope: scope) { waitingRequests.remove($0) }
                // The 202 a request without the wait gets, once the action's record is committed.
                let acceptance: @Sendable () -> Void = {
                    let accepted = Self.marked(
                        HTTPResponse(status: 202, headers: Self.jsonHeaders, body: Self.receiptJSON(receipt)), isReplay)
                    guard let ticket else { return reply.send(accepted) }
                    ticket.whenCommitted { outcome in reply.send(outcome == .committed ? accepted : Self.notCommitted(outcome)) }
                }
                // Or the acceptance when the server stops first.
                self.waitingRequests.add(reply, acceptance: acceptance)
                // The state, once the action's own record and the states it produced are committed:
                // a 200 acknowledges the action as much as a 202 does.
                instance.whenSettled(receipt) { outcome in
                    // Settled because the instance went, not because the action finished: deleted,
                    // it never will; gone from memory, it stays accepted, as a 202 says.
                    switch instance.departure {
                    case .deleted?:
                        return reply.send(Problem.deletedWhileWaiting.response)
                    case .leftMemory?:
                        return acceptance()
                    case nil:
                        break
                    }
                    let shown: @Sendable () -> HTTPResponse = { Self.marked(HTTPResponse(Self.snapshot(instance).response), isReplay) }
                    guard outcome == .committed else { return reply.send(Self.notCommitted(outcome)) }
                    guard let ticket else { return reply.send(shown()) }
                    ticket.whenCommitted { outcome in reply.send(outcome == .committed ? shown() : Self.notCommitted(outcome)) }
                }
                // Whichever comes first answers; the later one is ignored.
                DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: timeout.nanoseconds))) {
                    acceptance()
                }
            })
    }

    /// The span of the action `request` sends to `instance`, continuing the trace its headers
    /// name (`traceparent`, as the tracer reads them); nil when nothing is traced.
    private func startTrace(_ request: HTTPRequest, on instance: any HostedInstance) -> (any Span)? {
        instance.traces?.startAction(continuing: request.headers, using: HTTPHeadersExtractor())
    }

    /// Whether an `If-None-Match` entity tag matches `etag` (strong, `"4"`): `*`, or the same tag
    /// strong or weak (`W/"4"`), as RFC 9110 §13.1.2's weak comparison has it.
    static func matches(_ tag: String, _ etag: String) -> Bool {
        tag == "*" || tag == etag || (tag.hasPrefix("W/") && tag.dropFirst(2) == etag)
    }

    func openEvents(_ request: HTTPRequest, _ scope: RequestScope) throws -> RouteReply {
        guard let instance = try self.instance(for: request, scope) else { return .needsStore }
        let lastEventID = try Self.lastEventID(request)
        let format = try Self.eventFormat(request.query["format"])
        let credentialsExpire = credentialsExpiry(of: request, by: scope.caller)
        let headers: HTTPHeaders = [
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        ]
        if request.method == .HEAD { return .now(HTTPResponse(status: 200, headers: headers)) }
        let limit = configuration.maxStreams
        guard openStreams.wrappingAdd(1, ordering: .relaxed).oldValue < limit else {
            openStreams.wrappingSubtract(1, ordering: .relaxed)
            throw Problem.tooManyStreams(limit: limit, perInstance: false)
        }
        var onWrite: (@Sendable (UInt64) -> Void)?
        if let traces = instance.traces { onWrite = { traces.wrote(version: $0) } }
        let subscriber = EventSubscriber(
            timeline: instance.timeline, resumingAfter: lastEventID, format: format,
            retryMilliseconds: configuration.retryMilliseconds, credentialsExpire: credentialsExpire, onWrite: onWrite
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
        return .now(
            .stream(
                status: 200, headers: headers, source: subscriber,
                heartbeat: HTTPHeartbeat(
                    interval: configuration.heartbeatInterval,
                    bytes: ServerSentEvents.heartbeat)))
    }

    func readHistory(_ request: HTTPRequest, _ scope: RequestScope) throws -> RouteReply {
        guard let instance = try self.instance(for: request, scope) else { return .needsStore }
        let after = try request.query["after"].map { (raw) throws(Problem) in try Self.version(raw, name: "after") }
        instance.touch()
        let latest = instance.timeline.latest.version
        let history = instance.timeline.history(after: after)
        var headers = Self.jsonHeaders
        headers["Cache-Control"] = "no-store"
        return .now(
            HTTPResponse(
                status: 200, headers: headers,
                body: InstanceHistory.body(id: instance.id, type: instance.typeName, history: history, latest: latest)))
    }

    /// The instance the request's path names; nil when it is not in memory and `scope` may not
    /// wait for the store (an event loop), which the route answers with ``RouteReply/needsStore``.
    /// One not in memory is brought back from the store. Throws a `Problem` when there is none,
    /// and when it is another subject's: exactly the answer for an id that does not exist.
    private func instance(for request: HTTPRequest, _ scope: RequestScope) throws -> (any HostedInstance)? {
        if let live = liveInstance(for: request) {
            guard scope.caller.mayReach(live) else { throw Problem.noSuchInstance(request.pathParameters["id"] ?? "") }
            return live
        }
        if needsStoreOffLoop(scope) { return nil }
        let id = request.pathParameters["id"] ?? ""
        // Not in memory: the store may hold it (activated here), or nothing does.
        let found = try Problem.rethrowing { () throws(HostingError) in try host.instance(id: id) }
        guard let found, scope.caller.mayReach(found) else { throw Problem.noSuchInstance(id) }
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

    /// Whether what the route does next may wait for the session store where `scope` must not
    /// (an event loop, with a store): then it answers ``RouteReply/needsStore`` before it changes
    /// anything. Without a store, every request is served on its loop.
    private func needsStoreOffLoop(_ scope: RequestScope) -> Bool {
        configuration.store != nil && !scope.mayWaitForStore
    }
}
