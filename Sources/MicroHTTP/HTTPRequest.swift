/// A complete HTTP request as handed to a handler.
///
/// The parts as received are kept in one shared, immutable box, so passing a request along (to
/// a route, into a closure, into a deferred reply) copies little.
public struct HTTPRequest: Sendable {
    private final class Parts: Sendable {
        let method: HTTPMethod
        let path: String
        let query: [String: String]
        let headers: HTTPHeaders
        let body: [UInt8]

        init(method: HTTPMethod, path: String, query: [String: String], headers: HTTPHeaders, body: [UInt8]) {
            self.method = method
            self.path = path
            self.query = query
            self.headers = headers
            self.body = body
        }
    }

    private let parts: Parts

    /// The request method.
    public var method: HTTPMethod { parts.method }
    /// The raw (still percent-encoded) path, without the query.
    public var path: String { parts.path }
    /// Query parameters, percent-decoded with `+` as space; the last value of a repeated name wins.
    /// A name or value with malformed escapes (such as `%zz`) is kept exactly as sent.
    public var query: [String: String] { parts.query }
    /// The request's header fields (case-insensitive lookup).
    public var headers: HTTPHeaders { parts.headers }
    /// The request body (at most the configured `maxBodySize` bytes).
    public var body: [UInt8] { parts.body }
    /// Values of the route's `{param}` segments, percent-decoded; filled by ``Router``.
    public var pathParameters = PathParameters()

    /// Builds a request; `target` is the request target (path, optionally `?query`).
    public init(method: HTTPMethod, target: String, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        if let mark = target.firstIndex(of: "?") {
            self.init(method: method, path: String(target[..<mark]),
                      query: PercentDecoding.query(target[target.index(after: mark)...]), headers: headers, body: body)
        } else {
            self.init(method: method, path: target, query: [:], headers: headers, body: body)
        }
    }

    /// Builds a request from its already separated parts.
    public init(method: HTTPMethod, path: String, query: [String: String], headers: HTTPHeaders, body: [UInt8]) {
        parts = Parts(method: method, path: path, query: query, headers: headers, body: body)
    }
}
