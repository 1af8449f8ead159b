import Foundation

/// A JSON value as an `Encodable` value describes it, before its keys are sorted and its bytes
/// written (built by `JSONTreeEncoder`, see `SortedJSONEncoder`).
///
/// Objects and arrays are boxes, so that a container handed out for a nested value writes into
/// the value its parent already holds, whatever order the containers are used in.
enum JSONTree {
    case null
    case bool(Bool)
    /// A number, already written as JSON text.
    case number(String)
    case string(String)
    case object(JSONObjectBox)
    case array(JSONArrayBox)
    /// What a super encoder writes, once its value's `encode(to:)` is done (`superEncoder`).
    case pending(JSONValueBox)

    /// Arrays and objects may nest less deep than this: the limit Foundation's `JSONEncoder` sets.
    static let maximumDepth = 512

    /// The form Foundation's encoder gives the types it does not let encode themselves: `Data`
    /// as base64, `URL` as its absolute string, `Decimal` as a number; nil for any other type.
    static func foundationForm<Value: Encodable>(of value: Value) -> JSONTree? {
        if Value.self == Data.self, let data = value as? Data { return .string(data.base64EncodedString()) }
        if Value.self == URL.self, let url = value as? URL { return .string(url.absoluteString) }
        if Value.self == Decimal.self, let decimal = value as? Decimal { return .number(decimal.description) }
        return nil
    }

    /// Appends the value as compact JSON, each object's keys in the order of their UTF-8 bytes;
    /// a key given more than once (the same bytes) keeps its last value.
    func write(to bytes: inout [UInt8], depth: Int = 0) throws {
        switch self {
        case .null: bytes.append(contentsOf: "null".utf8)
        case .bool(let value): bytes.append(contentsOf: (value ? "true" : "false").utf8)
        case .number(let text): bytes.append(contentsOf: text.utf8)
        case .string(let text): JSONText.appendString(text, to: &bytes)
        case .object(let box): try Self.writeObject(box, to: &bytes, depth: depth + 1)
        case .array(let box): try Self.writeArray(box.elements, to: &bytes, depth: depth + 1)
        case .pending(let box): try (box.tree ?? .object(JSONObjectBox())).write(to: &bytes, depth: depth)
        }
    }

    private static func writeObject(_ box: JSONObjectBox, to bytes: inout [UInt8], depth: Int) throws {
        guard depth < maximumDepth else { throw JSONText.nestedTooDeep }
        box.sortByKey()
        let fields = box.fields
        bytes.append(UInt8(ascii: "{"))
        var first = true
        for index in fields.indices {
            // Of equal keys, now side by side in the order given, the last one counts.
            if index + 1 < fields.count, fields[index + 1].key.utf8.elementsEqual(fields[index].key.utf8) { continue }
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            JSONText.appendString(fields[index].key, to: &bytes)
            bytes.append(UInt8(ascii: ":"))
            try fields[index].value.write(to: &bytes, depth: depth)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    private static func writeArray(_ elements: [JSONTree], to bytes: inout [UInt8], depth: Int) throws {
        guard depth < maximumDepth else { throw JSONText.nestedTooDeep }
        bytes.append(UInt8(ascii: "["))
        for index in elements.indices {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            try elements[index].write(to: &bytes, depth: depth)
        }
        bytes.append(UInt8(ascii: "]"))
    }
}

/// An object's fields in the order they were encoded, until they are sorted for writing.
final class JSONObjectBox {
    var fields: [(key: String, value: JSONTree)] = []

    init() {
        // Room for a small state's fields without growing the array field by field.
        fields.reserveCapacity(4)
    }

    /// Orders the fields by their keys' UTF-8 bytes. Stable, so of equal keys the last given
    /// comes last; an insertion sort, since objects are small and an already sorted one then
    /// costs one pass.
    func sortByKey() {
        guard fields.count > 1 else { return }
        for next in 1..<fields.count where JSONText.keyPrecedes(fields[next].key, fields[next - 1].key) {
            let moving = fields[next]
            var slot = next
            while slot > 0, JSONText.keyPrecedes(moving.key, fields[slot - 1].key) {
                fields[slot] = fields[slot - 1]
                slot -= 1
            }
            fields[slot] = moving
        }
    }
}

/// What one encoder has written. A super encoder's box is also held by the field or element it
/// fills, which must not hold the encoder itself: the encoder holds its parent, whose tree holds
/// the field, and the three would keep each other alive.
final class JSONValueBox {
    var tree: JSONTree?
}

/// An array's elements.
final class JSONArrayBox {
    var elements: [JSONTree] = []
}
