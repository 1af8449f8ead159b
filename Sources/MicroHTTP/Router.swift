/// Routes requests by method and path pattern: static segments and `{param}` segments.
///
/// Patterns are matched segment by segment against the percent-decoded request path; a `{name}`
/// segment matches any one non-empty segment and its decoded value lands in
/// `request.pathParameters[name]`. A path that matches no pattern gets `notFound`; a path that
/// matches only under other methods gets `methodNotAllowed` with an `Allow` header.
/// `HEAD` is served by the `GET` route; the server sends its headers (including the GET body's
/// `Content-Length`) and never writes a body for `HEAD`.
public struct Router: Sendable {
    private enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }

    private struct Route: Sendable {
        let method: HTTPMethod
        let segments: [Segment]
        let handler: HTTPHandler
    }

    private var routes: [Route] = []

    /// Builds the reply for a path no route matches.
    public var notFound: @Sendable (HTTPRequest) -> HTTPResponse = { _ in
        HTTPResponse.text("Not found\n", status: 404)
    }

    /// Builds the reply for a path matched only under other methods; the router adds `Allow`.
    public var methodNotAllowed: @Sendable (HTTPRequest, _ allowed: [HTTPMethod]) -> HTTPResponse = { _, _ in
        HTTPResponse.text("Method not allowed\n", status: 405)
    }

    /// An empty router.
    public init() {}

    /// Adds a route, e.g. `add(.POST, "/reactors/{id}/actions") { request in … }`.
    public mutating func add(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping HTTPHandler) {
        let segments = Self.split(String(pattern)).map { part -> Segment in
            if part.hasPrefix("{"), part.hasSuffix("}"), part.count > 2 {
                return .parameter(String(part.dropFirst().dropLast()))
            }
            return .literal(PercentDecoding.decodeOrKeep(part, plusAsSpace: false))
        }
        routes.append(Route(method: method, segments: segments, handler: handler))
    }

    /// Answers `request` with the matching route's handler, `notFound` or `methodNotAllowed`.
    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        let parts = Self.split(request.path).map { part -> Substring in
            part.utf8.contains(UInt8(ascii: "%")) ? Substring(PercentDecoding.decodeOrKeep(part, plusAsSpace: false)) : part
        }
        var allowed: [HTTPMethod] = []
        var fallback: (Route, [String: String])?
        for route in routes {
            guard let parameters = Self.match(route.segments, parts) else { continue }
            if route.method == request.method {
                return call(route, parameters, request)
            }
            if request.method == .HEAD, route.method == .GET, fallback == nil {
                fallback = (route, parameters)
            }
            if !allowed.contains(route.method) { allowed.append(route.method) }
        }
        if let (route, parameters) = fallback {
            return call(route, parameters, request)
        }
        guard !allowed.isEmpty else { return notFound(request) }
        if allowed.contains(.GET), !allowed.contains(.HEAD) { allowed.append(.HEAD) }
        var response = methodNotAllowed(request, allowed)
        response.headers["Allow"] = allowed.map(\.rawValue).joined(separator: ", ")
        return response
    }

    private func call(_ route: Route, _ parameters: [String: String], _ request: HTTPRequest) -> HTTPResponse {
        var request = request
        request.pathParameters = parameters
        return route.handler(request)
    }

    private static func split(_ path: String) -> [Substring] {
        let trimmed = path.utf8.first == UInt8(ascii: "/") ? path.dropFirst() : path[...]
        return trimmed.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map { Substring($0) }
    }

    /// Matches already percent-decoded path segments against a route's pattern.
    private static func match(_ segments: [Segment], _ parts: [Substring]) -> [String: String]? {
        guard segments.count == parts.count else { return nil }
        var parameters: [String: String] = [:]
        for (segment, part) in zip(segments, parts) {
            switch segment {
            case .literal(let literal):
                guard part.utf8.elementsEqual(literal.utf8) else { return nil }
            case .parameter(let name):
                guard !part.isEmpty else { return nil }
                parameters[name] = String(part)
            }
        }
        return parameters
    }
}
