/// A complete HTTP request as handed to a handler.
public struct HTTPRequest: Sendable {
    /// The request method.
    public let method: HTTPMethod
    /// The raw (still percent-encoded) path, without the query.
    public let path: String
    /// Query parameters, percent-decoded with `+` as space; the last value of a repeated name wins.
    /// A name or value with malformed escapes (such as `%zz`) is kept exactly as sent.
    public let query: [String: String]
    /// The request's header fields (case-insensitive lookup).
    public let headers: HTTPHeaders
    /// The request body (at most the configured `maxBodySize` bytes).
    public let body: [UInt8]
    /// Values of the route's `{param}` segments, percent-decoded; filled by ``Router``.
    public var pathParameters: [String: String]

    /// Builds a request; `target` is the request target (path, optionally `?query`).
    public init(method: HTTPMethod, target: String, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        if let mark = target.firstIndex(of: "?") {
            self.path = String(target[..<mark])
            self.query = PercentDecoding.query(target[target.index(after: mark)...])
        } else {
            self.path = target
            self.query = [:]
        }
        self.method = method
        self.headers = headers
        self.body = body
        self.pathParameters = [:]
    }

    /// Builds a request from its already separated parts.
    public init(method: HTTPMethod, path: String, query: [String: String], headers: HTTPHeaders, body: [UInt8]) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.pathParameters = [:]
    }
}
