import MicroHTTP
import ReactorCore
import ReactorHosting
import SortedJSON
import Synchronization

// How routes answer: snapshots, receipts, and answers that wait for a commit.

extension ReactorService {
    /// `make`'s response now, or once `ticket`'s write is committed.
    static func reply(
        after ticket: CommitTicket?, _ scope: RequestScope,
        _ make: @escaping @Sendable () -> HTTPResponse
    ) -> RouteReply {
        guard let ticket else { return .now(make()) }
        return .deferred(
            HTTPResponse.deferred { responder in
                let reply = ReplyOnce(responder: responder, scope: scope)
                ticket.whenCommitted { outcome in reply.send(outcome == .committed ? make() : Self.notCommitted(outcome)) }
            })
    }

    /// The answer when the store did not commit what a request did: it was not accepted.
    static func notCommitted(_ outcome: CommitOutcome) -> HTTPResponse {
        outcome == .overtaken ? overtaken.response : commitFailed.response
    }

    static let commitFailed = Problem(
        HostingError.storeUnavailable(
            "the session store failed to commit this request (see the server's log)"))
    /// Another node claimed the instance while the request's write was being committed.
    static let overtaken = Problem(HostingError.ownedElsewhere(retryAfterSeconds: 1))

    /// `response`, marked `Idempotent-Replayed: true` when it answers a retry of an action
    /// already sent (the first attempt's answer).
    static func marked(_ response: HTTPResponse, _ isReplay: Bool) -> HTTPResponse {
        guard isReplay else { return response }
        var response = response
        response.headers["Idempotent-Replayed"] = "true"
        return response
    }

    static let jsonHeaders: HTTPHeaders = ["Content-Type": "application/json"]

    static func etag(_ version: UInt64) -> String { "\"\(version)\"" }

    /// The instance's snapshot at its latest version, built once per version.
    static func snapshot(_ instance: any HostedInstance) -> InstanceSnapshot {
        instance.timeline.latestSnapshot { state in
            let etag = etag(state.version)
            let response = PreparedResponse(
                status: 200, headers: snapshotHeaders(etag: etag),
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
}

/// What a route answers: a response now, one whose completion the route took over, or a request
/// to be served again where it may wait for the session store.
enum RouteReply: Sendable {
    case now(HTTPResponse)
    /// A deferred response that calls `RequestScope.finish` itself when it completes.
    case deferred(HTTPResponse)
    /// The route needs the session store (its instance is not in memory, or a new id must be
    /// checked against the stored ones), which an event loop must not wait for: the same handler
    /// serves the request again off the loops, where ``RequestScope/mayWaitForStore`` is true.
    /// Returned before the route has changed anything.
    case needsStore
}

/// Sends one deferred reply, whichever of its racing causes (settled or timed out) comes first.
final class ReplyOnce: Sendable {
    private let responder: HTTPResponder
    private let scope: RequestScope
    private let sent = Atomic<Bool>(false)
    private let whenSent: (@Sendable (ReplyOnce) -> Void)?

    /// `whenSent` is called once the reply is sent, with this reply.
    init(responder: HTTPResponder, scope: RequestScope, whenSent: (@Sendable (ReplyOnce) -> Void)? = nil) {
        self.responder = responder
        self.scope = scope
        self.whenSent = whenSent
    }

    func send(_ response: HTTPResponse) {
        guard !sent.exchange(true, ordering: .acquiringAndReleasing) else { return }
        responder.respond(scope.finish(response))
        whenSent?(self)
    }

    /// Whether ``send(_:)`` has been called.
    var hasBeenSent: Bool { sent.load(ordering: .acquiring) }
}
