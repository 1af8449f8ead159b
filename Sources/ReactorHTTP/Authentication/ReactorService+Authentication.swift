import Foundation
import MicroHTTP
import ReactorHosting

// Who sends each request, when the service authenticates its callers, and what they may reach.

/// Who a route needs.
enum RouteAccess: Sendable {
    /// Anybody: health, readiness, the registered types and the static pages.
    case open
    /// An authenticated subject: the routes on `/reactors`.
    case subject
    /// An admin: `/metrics` and the history route.
    case admin
}

/// The sender of a request, as authentication found it.
struct Caller: Sendable {
    /// The subject; nil without authentication, or for the admin token.
    let subject: String?
    /// Whether the caller reaches every session and the admin routes.
    let isAdmin: Bool
    /// The bearer token the subject was authenticated with, if any (for its expiry).
    var token: String? = nil

    /// Anybody, when the service authenticates nobody: the id is the only credential.
    static let anyone = Caller(subject: nil, isAdmin: true)

    /// Whether the caller may reach a session that `owner` created. One created by nobody in
    /// particular (before authentication was turned on) is reached by any caller that has its id.
    /// Subjects are compared byte for byte (``Swift/String/hasSameBytes(as:)``).
    func mayReach(_ owner: String?) -> Bool {
        guard !isAdmin, let owner else { return true }
        guard let subject else { return false }
        return owner.hasSameBytes(as: subject)
    }

    /// Whether the caller may reach `instance` (its owner is read only when that matters).
    func mayReach(_ instance: any HostedInstance) -> Bool {
        isAdmin || mayReach(instance.owner)
    }
}

extension ReactorService {
    /// The caller of `request` for a route that needs `access`; throws `401` without valid
    /// credentials, `403` when an admin route is asked for by someone else.
    func caller(of request: HTTPRequest, for access: RouteAccess) throws(Problem) -> Caller {
        guard access != .open, let authentication = configuration.authentication else { return .anyone }
        let token = try Self.token(of: request, authentication)
        if let adminToken = authentication.adminToken, let token, Self.constantTimeEquals(token, adminToken) {
            return Caller(subject: nil, isAdmin: true)
        }
        let subject: String?
        do {
            subject = try authentication.authenticator.authenticate(AuthenticationRequest(request, token: token))
        } catch {
            throw Problem.unauthenticated(realm: authentication.realm, refusal: error.reason)
        }
        guard let subject, !subject.isEmpty else { throw Problem.unauthenticated(realm: authentication.realm, refusal: nil) }
        // A subject is stored with its session and shown in logs: a control character (a NUL
        // cuts a C string short) makes it another subject there, or a line of its own.
        guard !subject.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            throw Problem.unauthenticated(realm: authentication.realm, refusal: "the subject contains a control character")
        }
        let isAdmin = authentication.adminSubjects.contains { $0.hasSameBytes(as: subject) }
        if access == .admin && !isAdmin {
            throw Problem.forbidden("this route is for an admin; the subject of this request is not one")
        }
        return Caller(subject: subject, isAdmin: isAdmin, token: token)
    }

    /// When the credentials `caller` sent `request` with expire (see
    /// ``Authenticator/credentialsExpiry(of:)``); nil when they do not, or nobody is authenticated
    /// (no service authentication, or the admin token).
    func credentialsExpiry(of request: HTTPRequest, by caller: Caller) -> ContinuousClock.Instant? {
        guard let authentication = configuration.authentication, caller.subject != nil,
            let expiry = authentication.authenticator.credentialsExpiry(of: AuthenticationRequest(request, token: caller.token))
        else { return nil }
        // Past: at once. Further than a century (or not a number): never.
        let seconds = max(0, expiry.timeIntervalSinceNow)
        guard seconds < 3_155_760_000 else { return nil }
        return ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
    }

    /// The bearer token `request` carries: from its `Authorization` header, else the cookie,
    /// else (where allowed) `?access_token=`. Throws `401` for a `Bearer` header without a
    /// well-formed token, and `400` for a request whose credentials say two things: two
    /// `Authorization` headers, two `access_token` parameters where the query may carry one, or a
    /// token both in the header and in the query (RFC 6750 §3.1, `invalid_request`), where a
    /// proxy and the server could each take another one.
    private static func token(of request: HTTPRequest, _ authentication: AuthenticationConfiguration) throws(Problem) -> String? {
        let headers = request.headers.values(for: "Authorization")
        guard headers.count <= 1 else {
            throw Problem.ambiguousCredentials(realm: authentication.realm, "the request has more than one Authorization header")
        }
        if authentication.acceptsQueryToken, request.repeatedQueryNames.contains("access_token") {
            throw Problem.ambiguousCredentials(
                realm: authentication.realm, "the request's query has more than one access_token parameter")
        }
        if let header = headers.first {
            switch RequestCredentials.authorization(header) {
            case .bearer(let token):
                if authentication.acceptsQueryToken, request.query["access_token"] != nil {
                    throw Problem.ambiguousCredentials(
                        realm: authentication.realm, "the request carries a token both in its Authorization header and in its query")
                }
                return token
            case .malformedBearer:
                throw Problem.unauthenticated(
                    realm: authentication.realm, refusal: "the Authorization header is not 'Bearer <token>'")
            case .otherScheme: break
            }
        }
        if let name = authentication.cookieName, let cookies = request.headers["Cookie"],
            let token = RequestCredentials.cookie(named: name, in: cookies)
        {
            return token
        }
        if authentication.acceptsQueryToken, let token = request.query["access_token"], !token.isEmpty {
            return token
        }
        return nil
    }

    /// Whether two secrets are equal, in a time that does not depend on where they differ.
    static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        let (x, y) = (Array(a.utf8), Array(b.utf8))
        var difference = UInt8(truncatingIfNeeded: x.count ^ y.count)
        for index in 0..<max(x.count, y.count) {
            difference |= (index < x.count ? x[index] : 0) ^ (index < y.count ? y[index] : 0)
        }
        return difference == 0
    }
}

extension Problem {
    /// `401` with a `WWW-Authenticate: Bearer` challenge; `refusal` says what was wrong with
    /// the credentials the request carried (nil: it carried none).
    static func unauthenticated(realm: String, refusal: String?) -> Problem {
        var challenge = "Bearer realm=\"\(quotable(realm))\""
        if let refusal { challenge += ", error=\"invalid_token\", error_description=\"\(quotable(refusal))\"" }
        var problem = Problem(
            status: 401, kind: "unauthenticated", title: "Unauthenticated",
            detail: refusal.map { "the request's credentials were refused: \($0)" }
                ?? "this route needs credentials: a bearer token (Authorization: Bearer …)")
        problem.challenge = challenge
        return problem
    }

    /// `400` for credentials that say two things (RFC 6750 §3.1's `invalid_request`), with a
    /// `WWW-Authenticate: Bearer` challenge naming the error.
    static func ambiguousCredentials(realm: String, _ detail: String) -> Problem {
        var problem = Problem(status: 400, kind: "bad-request", title: "Bad Request", detail: detail)
        problem.challenge = "Bearer realm=\"\(quotable(realm))\", error=\"invalid_request\", error_description=\"\(quotable(detail))\""
        return problem
    }

    static func forbidden(_ detail: String) -> Problem {
        Problem(status: 403, kind: "forbidden", title: "Forbidden", detail: detail)
    }

    /// `text` as a quoted-string's content in a header: printable ASCII without `"` or `\`.
    private static func quotable(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.prefix(200).map { $0.value >= 0x20 && $0.value < 0x7F && $0 != "\"" && $0 != "\\" ? $0 : "?" }))
    }
}
