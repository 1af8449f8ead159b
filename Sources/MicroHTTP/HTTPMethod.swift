/// An HTTP request method such as `GET` or `POST`; any token is accepted.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The method token as sent on the request line, e.g. `"GET"`.
    public let rawValue: String

    /// Wraps a method token; methods are case-sensitive in HTTP.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// `GET`
    public static let GET = HTTPMethod(rawValue: "GET")
    /// `HEAD`
    public static let HEAD = HTTPMethod(rawValue: "HEAD")
    /// `POST`
    public static let POST = HTTPMethod(rawValue: "POST")
    /// `PUT`
    public static let PUT = HTTPMethod(rawValue: "PUT")
    /// `DELETE`
    public static let DELETE = HTTPMethod(rawValue: "DELETE")
    /// `PATCH`
    public static let PATCH = HTTPMethod(rawValue: "PATCH")
    /// `OPTIONS`
    public static let OPTIONS = HTTPMethod(rawValue: "OPTIONS")

    /// The methods declared above, the ones HTTP defines for general use.
    public static let standard: [HTTPMethod] = [.GET, .HEAD, .POST, .PUT, .DELETE, .PATCH, .OPTIONS]

    /// Whether this is one of the ``standard`` methods rather than a token a client made up.
    public var isStandard: Bool { Self.standard.contains(self) }

    /// The method token.
    public var description: String { rawValue }
}
