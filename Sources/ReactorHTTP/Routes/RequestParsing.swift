import MicroHTTP
import ReactorHosting
import Tracing

// What a route reads from a request: its body's media type and JSON, its headers and query.

extension ReactorService {
    func requireJSON(_ request: HTTPRequest) throws(Problem) {
        guard let contentType = request.headers["Content-Type"],
            contentType != "application/json"
        else { return }
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingSpaces.lowercased() } ?? ""
        let accepted =
            mediaType.isEmpty || mediaType == "application/json" || mediaType.hasSuffix("+json")
            || mediaType == "application/x-www-form-urlencoded"
        guard accepted else { throw Problem.unsupportedMediaType(contentType) }
    }

    /// The request's `Idempotency-Key`, unquoted (a structured-field string, `"…"`, or bare);
    /// nil when there is none. Refuses one that is not 1 to 255 visible ASCII characters.
    static func idempotencyKey(_ request: HTTPRequest) throws(Problem) -> String? {
        guard var key = request.headers["Idempotency-Key"]?.trimmingSpaces else { return nil }
        if key.utf8.count >= 2, key.hasPrefix("\""), key.hasSuffix("\"") { key = String(key.dropFirst().dropLast()) }
        guard RememberedKey.isValid(key) else {
            throw Problem.invalidParameter("Idempotency-Key must be 1 to 255 visible ASCII characters, without spaces")
        }
        return key
    }

    /// The version a stream resumes after: the `Last-Event-ID` header's, else `?lastEventId=`'s.
    /// Each that is given must be digits only (`lastEventId` also when the header wins); an
    /// empty header counts as absent (a client that has seen no event yet may send one).
    static func lastEventID(_ request: HTTPRequest) throws(Problem) -> UInt64? {
        let query = try request.query["lastEventId"].map { (raw) throws(Problem) in try version(raw, name: "lastEventId") }
        if let header = request.headers["Last-Event-ID"]?.trimmingSpaces, !header.isEmpty {
            return try version(header, name: "Last-Event-ID")
        }
        return query
    }

    /// A state version given as `name` (a header or query parameter): digits only.
    static func version(_ text: String, name: String) throws(Problem) -> UInt64 {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let version = UInt64(text)
        else {
            throw Problem.invalidParameter("\(name) must be a state version (a non-negative integer), not '\(text.prefix(64))'")
        }
        return version
    }

    /// `?format=`: `state` (whole states, the default) or `patch` (RFC 6902 patches).
    static func eventFormat(_ raw: String?) throws(Problem) -> EventFormat {
        switch raw {
        case nil, "state": return .states
        case "patch": return .patches
        case let other?:
            throw Problem.invalidParameter("format must be state or patch, not '\(other.prefix(64))'")
        }
    }

    static func flag(_ raw: String?, name: String) throws(Problem) -> Bool {
        switch raw?.lowercased() {
        case nil, "false", "0", "no": return false
        case "", "true", "1", "yes": return true
        case let other?:
            throw Problem.invalidParameter("\(name) must be true or false, not '\(other.prefix(64))'")
        }
    }
}

/// The JSON body of `POST /reactors`: `{"type":…}`, with `"parameters"` for a type registered
/// with parameters, and nothing else (a field the server does not know is refused rather than
/// ignored, as openapi.yaml's `additionalProperties: false` says).
struct CreateInstanceRequest: Decodable {
    let type: String
    let parameters: JSONValue?

    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        if let unknown = container.allKeys.map(\.stringValue).sorted().first(where: { $0 != "type" && $0 != "parameters" }) {
            throw DecodingError.dataCorruptedError(
                forKey: Key(stringValue: unknown), in: container,
                debugDescription:
                    "unknown field '\(unknown.prefix(64))' (a creation names its 'type' and, for a type that takes them, its 'parameters')")
        }
        type = try container.decode(String.self, forKey: Key(stringValue: "type"))
        parameters = try container.decodeIfPresent(JSONValue.self, forKey: Key(stringValue: "parameters"))
    }
}

/// Reads trace context (`traceparent`, `tracestate`, …) from request headers.
struct HTTPHeadersExtractor: Extractor {
    func extract(key: String, from headers: HTTPHeaders) -> String? { headers[key] }
}

extension Substring {
    /// The text without leading and trailing spaces and tabs.
    var trimmingSpaces: String {
        let utf8 = self.utf8
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 }
        guard let first = utf8.firstIndex(where: { !isSpace($0) }),
            let last = utf8.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(decoding: utf8[first...last], as: UTF8.self)
    }
}

extension String {
    /// The text without leading and trailing spaces and tabs.
    var trimmingSpaces: String { self[...].trimmingSpaces }
}
