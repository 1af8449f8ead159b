/// Who may use a reactor service, when it authenticates its callers
/// (``ReactorServiceConfiguration/authentication``).
///
/// With it, every route on `/reactors` needs a subject (``Authenticator``): without valid
/// credentials it answers `401` with `WWW-Authenticate: Bearer`. A session records the subject
/// that created it, and answers any other subject `404`, exactly as for an id that does not
/// exist; so an id alone, leaked or logged, opens nothing. `/metrics` and
/// `/reactors/{id}/history` are an admin's (``adminSubjects``, or the ``adminToken``), and an
/// admin reaches every session. `/healthz`, `/readyz`, `/types` and the static pages stay open.
public struct AuthenticationConfiguration: Sendable {
    /// Maps each request to its subject.
    public var authenticator: any Authenticator
    /// The cookie a browser's `EventSource` (which cannot send headers) carries the token in;
    /// nil: no cookie is read.
    public var cookieName: String?
    /// Whether a token is also taken from the `?access_token=` query parameter (RFC 6750 §2.3),
    /// for clients that can set neither a header nor a cookie. A URL ends up in more places
    /// than a header (proxy logs, browser history); the server never logs the query.
    public var acceptsQueryToken = false
    /// The subjects with admin rights: `/metrics`, the history route, and every session.
    public var adminSubjects: Set<String> = []
    /// A token that grants admin rights by itself, without a subject, such as the one
    /// Prometheus scrapes `/metrics` with; nil: none does. It creates no sessions.
    public var adminToken: String?
    /// The realm named in `WWW-Authenticate` challenges.
    public var realm = "reactor-server"

    /// Authenticates every request with `authenticator`.
    public init(authenticator: any Authenticator) {
        self.authenticator = authenticator
    }
}
