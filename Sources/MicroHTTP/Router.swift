#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
        let path = Self.trimmingLeadingSlash(request.path)
        var allowed: [HTTPMethod] = []
        var fallback: Route?
        for route in routes where Self.matches(route.segments, path) {
            if route.method == request.method {
                return call(route, Self.parameters(route.segments, path), request)
            }
            if request.method == .HEAD, route.method == .GET, fallback == nil {
                fallback = route
            }
            if !allowed.contains(route.method) { allowed.append(route.method) }
        }
        if let route = fallback {
            return call(route, Self.parameters(route.segments, path), request)
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
        trimmingLeadingSlash(path).utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map { Substring($0) }
    }

    private static func trimmingLeadingSlash(_ path: String) -> Substring {
        path.utf8.first == UInt8(ascii: "/") ? path.dropFirst() : path[...]
    }

    /// Whether the path matches the route's pattern (same number of segments, equal literals,
    /// a non-empty segment for every parameter). Allocates nothing unless a segment is escaped.
    private static func matches(_ segments: [Segment], _ path: Substring) -> Bool {
        visitSegments(of: path, count: segments.count) { index, part in
            switch segments[index] {
            case .literal(let literal): equal(part, literal)
            case .parameter: !part.isEmpty
            }
        }
    }

    /// The values of a matching route's parameters, by name, percent-decoded.
    private static func parameters(_ segments: [Segment], _ path: Substring) -> [String: String] {
        var parameters: [String: String] = [:]
        _ = visitSegments(of: path, count: segments.count) { index, part in
            if case .parameter(let name) = segments[index] {
                parameters[name] = PercentDecoding.decodeOrKeep(Substring(decoding: part, as: UTF8.self), plusAsSpace: false)
            }
            return true
        }
        return parameters
    }

    /// Calls `visit` with each raw `/`-separated segment of `path` while it returns true.
    /// - Returns: whether the path has exactly `count` segments and `visit` accepted them all.
    private static func visitSegments(of path: Substring, count: Int,
                                      _ visit: (Int, UnsafeBufferPointer<UInt8>) -> Bool) -> Bool {
        var path = path
        return path.withUTF8 { bytes in
            var start = 0
            for index in 0..<count {
                let end = bytes[start...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.count
                let isLast = index == count - 1
                guard isLast == (end == bytes.count),
                      visit(index, UnsafeBufferPointer(rebasing: bytes[start..<end])) else { return false }
                start = end + 1
            }
            return count > 0
        }
    }

    /// Whether a raw path segment equals a literal segment of a pattern (decoding the segment
    /// first when it has escapes).
    private static func equal(_ part: UnsafeBufferPointer<UInt8>, _ literal: String) -> Bool {
        if part.contains(UInt8(ascii: "%")) {
            let decoded = PercentDecoding.decodeOrKeep(Substring(decoding: part, as: UTF8.self), plusAsSpace: false)
            return decoded == literal
        }
        var literal = literal
        return literal.withUTF8 { literal in
            literal.count == part.count && (part.isEmpty || memcmp(part.baseAddress!, literal.baseAddress!, part.count) == 0)
        }
    }
}
