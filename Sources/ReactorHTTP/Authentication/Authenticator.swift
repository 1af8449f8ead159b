import Foundation
import MicroHTTP

/// Tells who sends a request: maps it to a *subject* (a user, a service account), or refuses
/// it. With one configured (``ReactorServiceConfiguration/authentication``), a session belongs
/// to the subject that created it, and is served to that subject only (and to admins).
///
/// `reactor-server --auth jwt` verifies JSON Web Tokens; a team's app implements this protocol
/// for anything else (API keys, a session cookie its own login sets, …):
///
/// ```swift
/// struct APIKeys: Authenticator {
///     let subjects: [String: String]  // key → subject
///     func authenticate(_ request: AuthenticationRequest) throws(AuthenticationFailure) -> String? {
///         guard let key = request.token else { return nil }
///         guard let subject = subjects[key] else { throw AuthenticationFailure("unknown API key") }
///         return subject
///     }
/// }
/// ```
///
/// It is called on the server's threads, once for every request to a route that needs a
/// subject, before the route runs: answer from memory, without blocking (keep what you look up
/// elsewhere in a cache).
public protocol Authenticator: Sendable {
    /// The subject `request` speaks for; nil when it carries no credentials (the route answers
    /// `401`). Throws when it carries credentials that are not valid (also `401`, with the
    /// failure's reason as its detail).
    func authenticate(_ request: AuthenticationRequest) throws(AuthenticationFailure) -> String?

    /// When the credentials of `request`, which ``authenticate(_:)`` accepted, stop being valid
    /// (a token's expiry, with any leeway); nil when they do not expire, which the default
    /// implementation answers. An event stream opened with them ends then (within a heartbeat
    /// interval): its client reconnects with `Last-Event-ID`, as after any dropped connection,
    /// and authenticates anew, so a stream outlives its credentials no more than a request does.
    /// Asked only when a stream opens.
    func credentialsExpiry(of request: AuthenticationRequest) -> Date?
}

extension Authenticator {
    /// Nil: the credentials do not expire, and streams opened with them last.
    public func credentialsExpiry(of request: AuthenticationRequest) -> Date? { nil }
}

/// Why an ``Authenticator`` refused a request's credentials: an expired token, a bad signature,
/// another audience… The reason is sent to the client (in the problem's detail and in the
/// `WWW-Authenticate` challenge's `error_description`): never put a secret in it.
public struct AuthenticationFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong with the credentials, in words.
    public var reason: String

    /// A refusal for `reason`.
    public init(_ reason: String) {
        self.reason = reason
    }

    public var description: String { reason }
}

/// What an ``Authenticator`` reads of a request.
public struct AuthenticationRequest: Sendable {
    private let request: HTTPRequest
    /// The bearer token the request carries: from its `Authorization: Bearer` header, else
    /// from the cookie the service names (``AuthenticationConfiguration/cookieName``), else,
    /// where the service allows it, from its `?access_token=` query parameter. Nil when none.
    public let token: String?

    init(_ request: HTTPRequest, token: String?) {
        self.request = request
        self.token = token
    }

    /// The request's method, such as `POST`.
    public var method: String { request.method.rawValue }

    /// The request's path, without its query.
    public var path: String { request.path }

    /// The address of the client, as the server saw it (behind a proxy, the proxy's).
    public var remoteAddress: String? { request.remoteAddress }

    /// The value of the header `name` (case-insensitive), nil when the request has none.
    public func header(_ name: String) -> String? { request.headers[name] }

    /// The value of the cookie `name`, nil when the request sends none.
    public func cookie(_ name: String) -> String? {
        request.headers["Cookie"].flatMap { RequestCredentials.cookie(named: name, in: $0) }
    }
}
