/// The values of the `{name}` segments of a route's pattern in one request's path, decoded when
/// read (`request.pathParameters["id"]`).
///
/// Matching a request stores nothing new: this holds the request's path and the route's list of
/// parameter names and positions, both shared, and finds a value only when it is asked for.
public struct PathParameters: Sendable {
    /// A parameter's name and the index of its segment in the pattern.
    struct Slot: Sendable {
        let name: String
        let segment: Int
    }

    private let path: String
    private let slots: [Slot]

    /// No parameters.
    public init() {
        path = ""
        slots = []
    }

    /// The parameters `slots` names, found in `path` (a path the route's pattern matched).
    init(path: String, slots: [Slot]) {
        self.path = path
        self.slots = slots
    }

    /// The percent-decoded value of the parameter `name` (kept as sent when its escapes are
    /// malformed), or nil when the route has no such parameter.
    public subscript(name: String) -> String? {
        var value: String?
        withRawValue(of: name) { raw in value = PercentDecoding.decodeOrKeep(pathSegment: raw) }
        return value
    }

    /// Calls `body` with the UTF-8 of the parameter `name` as sent (not percent-decoded), in
    /// place. Returns false, without calling it, when the route has no such parameter.
    @discardableResult
    public func withRawValue(of name: String, _ body: (UnsafeBufferPointer<UInt8>) -> Void) -> Bool {
        guard let segment = slots.first(where: { $0.name == name })?.segment else { return false }
        var path = path
        return path.withUTF8 { bytes in
            let segments = PathSegments.trimmingLeadingSlash(bytes)
            guard let range = PathSegments.range(of: segment, in: segments) else { return false }
            body(UnsafeBufferPointer(rebasing: segments[range]))
            return true
        }
    }
}

/// The `/`-separated segments of a path's bytes (after its leading `/`), empty ones included.
enum PathSegments {
    static func trimmingLeadingSlash(_ bytes: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        bytes.first == UInt8(ascii: "/") ? UnsafeBufferPointer(rebasing: bytes[1...]) : bytes
    }

    /// How many segments `path` has: one more than its slashes.
    static func count(in path: UnsafeBufferPointer<UInt8>) -> Int {
        var slashes = 0
        for byte in path where byte == UInt8(ascii: "/") { slashes += 1 }
        return slashes + 1
    }

    /// Where segment `index` lies in `path`, or nil when the path has fewer segments.
    static func range(of index: Int, in path: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        var start = 0
        for _ in 0..<index {
            guard let slash = path[start...].firstIndex(of: UInt8(ascii: "/")) else { return nil }
            start = slash + 1
        }
        return start..<(path[start...].firstIndex(of: UInt8(ascii: "/")) ?? path.count)
    }
}
