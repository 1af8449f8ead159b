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
/// matches only under other methods gets `methodNotAllowed` with an `Allow` header and the
/// pattern it matched.
/// `HEAD` is served by the `GET` route; the server sends its headers (including the GET body's
/// `Content-Length`) and never writes a body for `HEAD`.
public struct Router: Sendable {
    /// One segment of a pattern: a literal, kept as its percent-decoded UTF-8, or a parameter.
    private struct Segment: Sendable {
        let literal: [UInt8]
        let isParameter: Bool
    }

    private struct Route: Sendable {
        let method: HTTPMethod
        let pattern: String
        let segments: [Segment]
        /// The parameters' names and positions, handed to every request this route answers.
        let parameters: [PathParameters.Slot]
        let handler: HTTPHandler
    }

    private var routes: [Route] = []

    /// Builds the reply for a path no route matches.
    public var notFound: @Sendable (HTTPRequest) -> HTTPResponse = { _ in
        HTTPResponse.text("Not found\n", status: 404)
    }

    /// Builds the reply for a path matched only under other methods, given those methods and the
    /// pattern of the first route the path matched (as passed to ``add(_:_:_:)``); the router
    /// adds `Allow`.
    public var methodNotAllowed: @Sendable (HTTPRequest, _ allowed: [HTTPMethod], _ pattern: String) -> HTTPResponse = { _, _, _ in
        HTTPResponse.text("Method not allowed\n", status: 405)
    }

    /// An empty router.
    public init() {}

    /// Adds a route, e.g. `add(.POST, "/reactors/{id}/actions") { request in … }`.
    public mutating func add(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping HTTPHandler) {
        var segments: [Segment] = []
        var parameters: [PathParameters.Slot] = []
        let parts = (pattern.utf8.first == UInt8(ascii: "/") ? pattern.dropFirst() : pattern[...])
            .split(separator: "/", omittingEmptySubsequences: false)
        for (index, part) in parts.enumerated() {
            if part.hasPrefix("{"), part.hasSuffix("}"), part.count > 2 {
                parameters.append(PathParameters.Slot(name: String(part.dropFirst().dropLast()), segment: index))
                segments.append(Segment(literal: [], isParameter: true))
            } else {
                segments.append(Segment(literal: Array(PercentDecoding.decodeOrKeep(part, plusAsSpace: false).utf8), isParameter: false))
            }
        }
        routes.append(Route(method: method, pattern: pattern, segments: segments, parameters: parameters, handler: handler))
    }

    /// Answers `request` with the matching route's handler, `notFound` or `methodNotAllowed`.
    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        var path = request.path
        // The first route matching path and method; else the GET route for a HEAD; else the
        // methods the path has routes for.
        let (chosen, allowed, matched) = path.withUTF8 { bytes -> (Int?, [HTTPMethod], Int?) in
            let path = PathSegments.trimmingLeadingSlash(bytes)
            let count = PathSegments.count(in: path)
            var allowed: [HTTPMethod] = []
            var fallback: Int?
            var matched: Int?
            for index in routes.indices where routes[index].segments.count == count && Self.matches(routes[index].segments, path) {
                let method = routes[index].method
                if method == request.method { return (index, [], index) }
                if matched == nil { matched = index }
                if request.method == .HEAD, method == .GET, fallback == nil { fallback = index }
                if !allowed.contains(method) { allowed.append(method) }
            }
            return (fallback, allowed, matched)
        }
        if let chosen {
            var request = request
            request.pathParameters = PathParameters(path: request.path, slots: routes[chosen].parameters)
            return routes[chosen].handler(request)
        }
        guard !allowed.isEmpty, let matched else { return notFound(request) }
        var methods = allowed
        if methods.contains(.GET), !methods.contains(.HEAD) { methods.append(.HEAD) }
        var response = methodNotAllowed(request, methods, routes[matched].pattern)
        response.headers["Allow"] = methods.map(\.rawValue).joined(separator: ", ")
        return response
    }

    /// Whether `path` (as many segments as the pattern) matches the pattern: equal literals, a
    /// non-empty segment for every parameter. Allocates nothing unless a segment is escaped.
    private static func matches(_ segments: [Segment], _ path: UnsafeBufferPointer<UInt8>) -> Bool {
        var start = 0
        for segment in segments {
            let end = path[start...].firstIndex(of: UInt8(ascii: "/")) ?? path.count
            let part = UnsafeBufferPointer(rebasing: path[start..<end])
            if segment.isParameter ? part.isEmpty : !equal(part, segment.literal) { return false }
            start = end + 1
        }
        return true
    }

    /// Whether a raw path segment equals a pattern's literal (decoding the segment first when it
    /// has escapes).
    private static func equal(_ part: UnsafeBufferPointer<UInt8>, _ literal: [UInt8]) -> Bool {
        if part.contains(UInt8(ascii: "%")) {
            return PercentDecoding.decodeOrKeep(pathSegment: part).utf8.elementsEqual(literal)
        }
        return literal.withUnsafeBufferPointer { literal in
            literal.count == part.count && (part.isEmpty || memcmp(part.baseAddress!, literal.baseAddress!, part.count) == 0)
        }
    }
}
