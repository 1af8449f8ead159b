/// Encodes `Encodable` values as compact JSON with sorted keys: the bytes Foundation's
/// `JSONEncoder` gives with `[.sortedKeys, .withoutEscapingSlashes]` and its default strategies
/// (`Date` as its own `Codable` form, `Data` as base64, `URL` as its absolute string, `Decimal` as
/// a number, non-finite floats refused), at a fraction of the cost: every published state that
/// somebody reads is encoded once, so this is on the path of every event stream.
///
/// Keys are ordered by their UTF-8 bytes, as Foundation orders them on Linux; a nested value that
/// encodes nothing becomes `{}`; a key encoded twice keeps its last value. Unlike Foundation,
/// which keeps an object's fields in a `[String: …]` dictionary, two keys that are canonically
/// equivalent Unicode but different bytes (`"é"` precomposed and decomposed) stay two fields,
/// as JSON itself compares keys.
///
/// Values are written as they encode (`JSONStreamEncoder`); one that uses its containers out of
/// nesting order is encoded again through a tree (`JSONTreeEncoder`), which takes any order.
public enum SortedJSONEncoder {
    /// Encodes `value` as JSON bytes.
    /// - Throws: `EncodingError.invalidValue` for a non-finite number, nesting deeper than
    ///   Foundation allows, or a top-level value that encodes nothing.
    public static func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] {
        let bytes = try JSONStreamEncoder.encode(value) ?? encodeThroughTree(value)
        // The bytes are kept with the state, as long as its instance holds it: no spare room
        // (the writers reserve more than a small state needs).
        return bytes.capacity > bytes.count + 16 ? bytes.withUnsafeBufferPointer { Array($0) } : bytes
    }

    /// Encodes `value` by building its `JSONTree` first: slower, but any use of containers works.
    static func encodeThroughTree<Value: Encodable>(_ value: Value) throws -> [UInt8] {
        guard let tree = try JSONTreeEncoder.tree(of: value, parent: nil, key: nil, ifEmpty: nil) else {
            throw nothingEncoded(value)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(128)
        try tree.write(to: &bytes)
        return bytes
    }

    /// The error for a top-level value that encodes nothing (Foundation's).
    static func nothingEncoded<Value>(_ value: Value) -> EncodingError {
        EncodingError.invalidValue(
            value,
            .init(
                codingPath: [],
                debugDescription: "Top-level \(Value.self) did not encode any values."
            ))
    }
}
