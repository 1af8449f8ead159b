import CMicroHTTPD

/// A complete HTTP request as handed to a handler.
///
/// The parts as received are kept in one shared, immutable box, so passing a request along (to
/// a route, into a closure, into a deferred reply) copies little.
public struct HTTPRequest: Sendable {
    private final class Parts: Sendable {
        let method: HTTPMethod
        let path: String
        let query: [String: String]
        let repeatedQueryNames: Set<String>
        let headers: HTTPHeaders
        let body: [UInt8]
        let client: ClientAddress?

        init(
            method: HTTPMethod, path: String, query: [String: String], repeatedQueryNames: Set<String>, headers: HTTPHeaders,
            body: [UInt8], client: ClientAddress?
        ) {
            self.method = method
            self.path = path
            self.query = query
            self.repeatedQueryNames = repeatedQueryNames
            self.headers = headers
            self.body = body
            self.client = client
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
    /// The names that appear more than once in the query (``query`` holds the last value of
    /// each), so that a handler can refuse a parameter that says two things, where a proxy and
    /// the server could each take another one.
    public var repeatedQueryNames: Set<String> { parts.repeatedQueryNames }
    /// The request's header fields (case-insensitive lookup).
    public var headers: HTTPHeaders { parts.headers }
    /// The request body (at most the configured `maxBodySize` bytes).
    public var body: [UInt8] { parts.body }
    /// The address of the client the request came from (behind a proxy, the proxy's), as text:
    /// `127.0.0.1`, `::1`; nil when unknown (a request made in code).
    public var remoteAddress: String? { parts.client?.text }
    /// Values of the route's `{param}` segments, percent-decoded; filled by ``Router``.
    public var pathParameters = PathParameters()

    /// Builds a request; `target` is the request target (path, optionally `?query`).
    public init(method: HTTPMethod, target: String, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        if let mark = target.firstIndex(of: "?") {
            let query = PercentDecoding.query(target[target.index(after: mark)...])
            parts = Parts(
                method: method, path: String(target[..<mark]), query: query.values, repeatedQueryNames: query.repeatedNames,
                headers: headers, body: body, client: nil)
        } else {
            parts = Parts(
                method: method, path: target, query: [:], repeatedQueryNames: [], headers: headers, body: body, client: nil)
        }
    }

    /// Builds a request from its already separated parts.
    public init(method: HTTPMethod, path: String, query: [String: String], headers: HTTPHeaders, body: [UInt8]) {
        parts = Parts(method: method, path: path, query: query, repeatedQueryNames: [], headers: headers, body: body, client: nil)
    }

    /// Builds a request that came from `client`.
    init(
        method: HTTPMethod, path: String, query: QueryParameters, headers: HTTPHeaders, body: [UInt8], client: ClientAddress?
    ) {
        parts = Parts(
            method: method, path: path, query: query.values, repeatedQueryNames: query.repeatedNames, headers: headers, body: body,
            client: client)
    }
}

/// A client's socket address as the connection reported it: kept as bytes, and formatted only
/// when asked for, so a request that never reads it pays for a copy of 28 bytes.
struct ClientAddress: Sendable {
    let address: sockaddr_in6

    /// The address without its port.
    var text: String? {
        var address = self.address
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let count = buffer.withUnsafeMutableBufferPointer { out in
            cmhd_format_address(&address, out.baseAddress, socklen_t(out.count))
        }
        guard count > 0 else { return nil }
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
