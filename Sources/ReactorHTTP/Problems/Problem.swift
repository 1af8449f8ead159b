import MicroHTTP
import ReactorCore
import ReactorHosting
import SortedJSON

/// An RFC 9457 problem: every failure the service answers is one of these, sent as
/// `application/problem+json` with a stable `type`.
public struct Problem: Error, Sendable, Equatable {
    /// The HTTP status code.
    public var status: Int
    /// The stable last segment of the problem's `type` URI, for example `invalid-action`.
    public var kind: String
    /// A short human summary of the kind of problem.
    public var title: String
    /// What was wrong with this request in particular.
    public var detail: String
    /// Seconds after which a retry may succeed (sent as `Retry-After`).
    public var retryAfter: Int?
    /// The `WWW-Authenticate` challenge of a `401` (or of a `400` for ambiguous credentials).
    var challenge: String?

    /// Creates a problem.
    public init(status: Int, kind: String, title: String, detail: String, retryAfter: Int? = nil) {
        self.status = status
        self.kind = kind
        self.title = title
        self.detail = detail
        self.retryAfter = retryAfter
    }

    /// The URI prefix of every problem `type` the service answers with.
    public static let typePrefix = "urn:reactor-server:problem:"

    /// The full `type` URI.
    public var type: String { Problem.typePrefix + kind }

    /// The problem as `application/problem+json` bytes (sorted keys).
    public var json: [UInt8] {
        var object = JSONObjectWriter()
        object.add("detail", string: detail)
        object.add("status", raw: String(status))
        object.add("title", string: title)
        object.add("type", string: type)
        return object.finish()
    }

    /// The problem as an HTTP response.
    public var response: HTTPResponse {
        var headers: HTTPHeaders = ["Content-Type": "application/problem+json"]
        if let retryAfter { headers["Retry-After"] = String(retryAfter) }
        if let challenge { headers["WWW-Authenticate"] = challenge }
        return HTTPResponse(status: status, headers: headers, body: json)
    }
}

extension Problem {
    static func notFound(_ detail: String) -> Problem {
        Problem(status: 404, kind: "not-found", title: "Not Found", detail: detail)
    }

    static func noSuchInstance(_ id: String) -> Problem {
        Problem(
            status: 404, kind: "unknown-instance", title: "Unknown reactor instance",
            detail: "no reactor instance has the id '\(id)' (it may have been deleted or expired)")
    }

    /// A `?wait=true` action whose instance was deleted (or expired) while it ran, cutting it off.
    static var deletedWhileWaiting: Problem {
        Problem(
            status: 404, kind: "unknown-instance", title: "Unknown reactor instance",
            detail: "the instance was deleted before the action finished; the action never will")
    }

    static func methodNotAllowed(_ method: String, path: String, allowed: [String]) -> Problem {
        Problem(
            status: 405, kind: "method-not-allowed", title: "Method Not Allowed",
            detail: "\(method) is not allowed on \(path); allowed: \(allowed.joined(separator: ", "))")
    }

    static func invalidBody(_ detail: String) -> Problem {
        Problem(status: 400, kind: "invalid-body", title: "Invalid request body", detail: detail)
    }

    static func invalidAction(_ detail: String) -> Problem {
        Problem(status: 400, kind: "invalid-action", title: "Invalid action", detail: detail)
    }

    static func unknownType(_ name: String, known: [String]) -> Problem {
        Problem(
            status: 400, kind: "unknown-type", title: "Unknown reactor type",
            detail: "no reactor type is registered as '\(name)'; known types: \(known.joined(separator: ", "))")
    }

    static func unsupportedMediaType(_ contentType: String) -> Problem {
        Problem(
            status: 415, kind: "unsupported-media-type", title: "Unsupported Media Type",
            detail: "the body must be JSON (application/json), not '\(contentType)'")
    }

    static func invalidParameter(_ detail: String) -> Problem {
        Problem(status: 400, kind: "invalid-parameter", title: "Invalid parameter", detail: detail)
    }

    static func tooManyInstances(limit: Int) -> Problem {
        Problem(
            status: 429, kind: "too-many-instances", title: "Too many reactor instances",
            detail: "the server holds its limit of \(limit) reactor instances; delete one or retry later",
            retryAfter: 5)
    }

    static func tooManyInstancesForSubject(limit: Int) -> Problem {
        Problem(
            status: 429, kind: "too-many-instances-for-subject", title: "Too many reactor instances for this subject",
            detail: "you hold the limit of \(limit) reactor instances per subject; delete one or retry later",
            retryAfter: 60)
    }

    static func tooManyStreams(limit: Int, perInstance: Bool) -> Problem {
        Problem(
            status: perInstance ? 429 : 503, kind: "too-many-streams", title: "Too many event streams",
            detail: perInstance
                ? "this instance already has its limit of \(limit) event streams"
                : "the server holds its limit of \(limit) event streams",
            retryAfter: 5)
    }

    static func instanceStalled(retryAfter: Int) -> Problem {
        Problem(
            status: 503, kind: "instance-stalled", title: "Reactor instance stalled",
            detail: "the instance is still inside mutate, reduce or a transform that has not returned; "
                + "it takes no actions until that returns",
            retryAfter: retryAfter)
    }

    static func serverError(status: Int, detail: String) -> Problem {
        switch status {
        case 413:
            return Problem(status: 413, kind: "body-too-large", title: "Content Too Large", detail: detail)
        case 431:
            return Problem(
                status: 431, kind: "headers-too-large", title: "Request Header Fields Too Large",
                detail: detail)
        case 414:
            return Problem(status: 414, kind: "uri-too-long", title: "URI Too Long", detail: detail)
        case 505:
            return Problem(
                status: 505, kind: "http-version-not-supported", title: "HTTP Version Not Supported",
                detail: detail)
        case 501:
            return Problem(
                status: 501, kind: "transfer-coding-not-supported", title: "Not Implemented", detail: detail)
        case 503:
            return Problem(
                status: 503, kind: "unavailable", title: "Service Unavailable", detail: detail,
                retryAfter: 1)
        case 500...:
            return Problem(status: status, kind: "internal", title: "Internal Server Error", detail: detail)
        default:
            return Problem(status: status, kind: "bad-request", title: "Bad Request", detail: detail)
        }
    }
}

extension Problem {
    /// The answer to a request the hosting layer refused.
    init(_ error: HostingError) {
        switch error {
        case .invalidAction(let detail):
            self = .invalidAction(detail)
        case .tooManyInstances(let limit):
            self = .tooManyInstances(limit: limit)
        case .tooManyInstancesForSubject(let limit):
            self = .tooManyInstancesForSubject(limit: limit)
        case .tooManySubscribers(let limit):
            self = .tooManyStreams(limit: limit, perInstance: true)
        case .instanceEnded:
            self = .notFound("the instance has ended")
        case .instanceStalled(let retryAfter):
            self = .instanceStalled(retryAfter: retryAfter)
        case .storeUnavailable(let detail):
            self = Problem(
                status: 503, kind: "store-unavailable", title: "Session store unavailable",
                detail: "the session store could not take the write, so nothing was accepted: \(detail)",
                retryAfter: 5)
        case .idempotencyKeyReused(let seq):
            self = Problem(
                status: 422, kind: "idempotency-key-reused", title: "Idempotency key reused",
                detail:
                    "this Idempotency-Key came with another action (seq \(seq)) before, so nothing was sent; a new action needs a new key")
        case .storedSessionIncompatible(let detail):
            self = Problem(
                status: 500, kind: "stored-session-incompatible", title: "Stored session incompatible",
                detail:
                    "this instance's stored session no longer decodes as its reactor type, so it cannot be served; the store keeps it unchanged, so a build that reads it (the previous one, or a State with a custom init(from:)) serves it again: \(detail)"
            )
        case .storeDamaged:
            // The store's message names the file and the statement: for the server's log only.
            self = Problem(
                status: 500, kind: "store-damaged", title: "Session store damaged",
                detail:
                    "the session store is damaged where this instance is kept, so nothing was done; a retry will not help until the store is restored from a backup (the server's log names the file)"
            )
        case .invalidParameters(let detail):
            self = Problem(
                status: 422, kind: "invalid-parameters", title: "Invalid creation parameters",
                detail: "nothing was created: \(detail)")
        case .ownedElsewhere(let retryAfter):
            self = Problem(
                status: 503, kind: Problem.instanceElsewhereKind, title: "Instance served by another node",
                detail: "another node serves this instance now, so nothing was done here; retry through the proxy, which routes to it",
                retryAfter: retryAfter)
        }
    }

    /// The kind of the problem answered for an instance another node serves.
    static let instanceElsewhereKind = "instance-elsewhere"

    /// Too many requests are waiting for the session store already.
    static let storeBusy = Problem(
        status: 503, kind: "store-unavailable", title: "Session store unavailable",
        detail: "too many requests are waiting for the session store, so nothing was done; retry later",
        retryAfter: 1)

    /// Runs `body`, turning a hosting refusal into its problem.
    static func rethrowing<Result>(_ body: () throws(HostingError) -> Result) throws(Problem) -> Result {
        do {
            return try body()
        } catch {
            throw Problem(error)
        }
    }

    /// A mutation error as problem JSON for an `event: error`.
    static func mutationFailedJSON(_ failure: MutationFailure) -> [UInt8] {
        var object = JSONObjectWriter()
        if let sequence = failure.actionSequence { object.add("action", raw: String(sequence)) }
        object.add("detail", string: failure.message)
        object.add("errorType", string: failure.errorType)
        object.add("title", string: "Mutation failed")
        object.add("type", string: Problem.typePrefix + "mutation-failed")
        return object.finish()
    }
}
