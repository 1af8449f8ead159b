import Foundation
import SortedJSON

/// The service's JSON coding: states are encoded with sorted keys so equal states give equal
/// bytes (and equal ETags); bodies are decoded by one shared `JSONDecoder`.
package enum JSONCoding {
    package static let decoder = JSONDecoder()

    /// Encodes a value as sorted-key JSON bytes (see `SortedJSONEncoder`).
    package static func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] {
        try SortedJSONEncoder.encode(value)
    }

    /// Encodes a value whose encoding cannot fail in practice (the service's own states);
    /// a failure becomes a JSON string naming it, so a subscriber still sees something honest.
    package static func encodeState<Value: Encodable>(_ value: Value) -> [UInt8] {
        do {
            return try encode(value)
        } catch {
            var bytes: [UInt8] = []
            JSONText.appendString("state could not be encoded: \(error)", to: &bytes)
            return bytes
        }
    }

    /// Whether `bytes` are valid UTF-8. Foundation's decoder would also read UTF-16 and UTF-32
    /// (detected from the first bytes), which RFC 8259 does not allow between systems.
    /// ASCII bodies, the usual case, are checked without building a string.
    package static func isUTF8(_ bytes: [UInt8]) -> Bool {
        bytes.allSatisfy { $0 < 0x80 } || String(validating: bytes, as: UTF8.self) != nil
    }

    /// Whether stored `bytes` may go out as they are, as an event's `data:` line and as a value
    /// inside a JSON answer: UTF-8 JSON that parses, on one line. Valid JSON holds a line break
    /// only as whitespace between tokens, where it would end the `data:` line early.
    package static func isSingleLineJSON(_ bytes: [UInt8]) -> Bool {
        JSONSyntax.isValid(bytes, lineBreaks: false) && isUTF8(bytes)
    }

    /// A sentence naming what a decoding error found wrong, and where. `parsed`: the JSON is
    /// known to parse (creation parameters, read from a body that did), so corrupt data at the
    /// top level is what Foundation reports, without the field's path, for a number its field
    /// cannot hold (1.5 or 1e20 for an `Int`), not JSON that does not parse.
    package static func describe(_ error: DecodingError, parsed: Bool = false) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return keys.isEmpty ? "the top level" : "'" + keys.joined(separator: ".") + "'"
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "missing field '\(key.stringValue)' at \(path(context))"
        case .typeMismatch(let type, let context):
            return "wrong type at \(path(context)): expected \(describe(type))"
        case .valueNotFound(let type, let context):
            return "missing value at \(path(context)): expected \(describe(type))"
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty, context.underlyingError != nil || context.debugDescription.contains("JSON") {
                return parsed
                    ? "a number one of the fields cannot hold: a fraction for a whole number, or one out of its range"
                    : "the body is not valid JSON"
            }
            return "\(context.debugDescription) at \(path(context))"
        @unknown default:
            return "the body could not be decoded: \(error)"
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "a boolean"
        case is Int.Type, is Int64.Type, is Int32.Type, is UInt.Type, is UInt64.Type: return "an integer"
        case is Double.Type, is Float.Type: return "a number"
        case is [Any].Type: return "an array"
        case is [String: Any].Type: return "an object"
        default: return "\(type)"
        }
    }
}
