import MicroHTTP

/// Cross-origin resource sharing: off unless origins are allowed, so a browser page on another
/// origin (an `EventSource`, a `fetch`) can use the service only when the operator says so.
struct CrossOriginPolicy: Sendable {
    let allowedOrigins: Set<String>

    init(allowedOrigins: [String]) {
        self.allowedOrigins = Set(allowedOrigins)
    }

    var isEnabled: Bool { !allowedOrigins.isEmpty }

    private func allowedOrigin(of request: HTTPRequest) -> String? {
        guard isEnabled, let origin = request.headers["Origin"] else { return nil }
        if allowedOrigins.contains("*") || allowedOrigins.contains(origin) { return origin }
        return nil
    }

    /// Adds `Access-Control-Allow-Origin` and friends when the request's origin is allowed.
    func decorate(_ response: inout HTTPResponse, for request: HTTPRequest) {
        guard let origin = allowedOrigin(of: request) else { return }
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Expose-Headers"] = "Location, ETag, Retry-After, Idempotent-Replayed, WWW-Authenticate"
        response.headers.add("Vary", "Origin")
    }

    /// The answer to a preflight `OPTIONS` request, or nil when CORS does not apply.
    func preflight(_ request: HTTPRequest, allowed: [HTTPMethod]) -> HTTPResponse? {
        guard allowedOrigin(of: request) != nil else { return nil }
        var methods = allowed.map(\.rawValue)
        methods.removeAll { $0 == "OPTIONS" }
        return HTTPResponse(
            status: 204,
            headers: [
                "Access-Control-Allow-Methods": methods.joined(separator: ", "),
                "Access-Control-Allow-Headers": "Authorization, Content-Type, Last-Event-ID, If-None-Match, Idempotency-Key",
                "Access-Control-Max-Age": "600",
            ])
    }
}
