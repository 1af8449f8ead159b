import Foundation

/// Builds the `JSONTree` of one value: the `Encoder` its `encode(to:)` is given. Containers may be
/// used in any order (a nested container written after a later sibling, super encoders), as
/// Foundation's encoder allows; `SortedJSONEncoder` uses it when `JSONStreamEncoder` cannot.
final class JSONTreeEncoder: Encoder {
    /// What the value has encoded so far.
    let written = JSONValueBox()
    var tree: JSONTree? {
        get { written.tree }
        set { written.tree = newValue }
    }
    private let parent: JSONTreeEncoder?
    private let key: (any CodingKey)?

    init(parent: JSONTreeEncoder?, key: (any CodingKey)?) {
        self.parent = parent
        self.key = key
    }

    /// Built from the parents only when asked for (errors, a value's own `encode(to:)`),
    /// so encoding does not build a path array for every value.
    var codingPath: [any CodingKey] {
        var path = parent?.codingPath ?? []
        if let key { path.append(key) }
        return path
    }

    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// The tree of `value`, encoded below `parent` under `key`; `{}` if it encodes nothing.
    static func tree<Value: Encodable>(of value: Value, parent: JSONTreeEncoder?, key: (any CodingKey)?) throws -> JSONTree {
        try tree(of: value, parent: parent, key: key, ifEmpty: .object(JSONObjectBox()))!
    }

    /// The tree of `value`, or `ifEmpty` if it encodes nothing.
    static func tree<Value: Encodable>(
        of value: Value,
        parent: JSONTreeEncoder?,
        key: (any CodingKey)?,
        ifEmpty: JSONTree?
    ) throws -> JSONTree? {
        if let scalar = JSONTree.foundationForm(of: value) { return scalar }
        let encoder = JSONTreeEncoder(parent: parent, key: key)
        try value.encode(to: encoder)
        return encoder.tree ?? ifEmpty
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedContainer<Key>(encoder: self, object: objectBox()))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedContainer(encoder: self, array: arrayBox())
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueContainer(encoder: self)
    }

    /// The object this encoder writes to: the one it already has, or a new one.
    func objectBox() -> JSONObjectBox {
        if case .object(let box) = tree { return box }
        let box = JSONObjectBox()
        tree = .object(box)
        return box
    }

    /// The array this encoder writes to: the one it already has, or a new one.
    func arrayBox() -> JSONArrayBox {
        if case .array(let box) = tree { return box }
        let box = JSONArrayBox()
        tree = .array(box)
        return box
    }

    static func number<Number: BinaryFloatingPoint & CustomStringConvertible>(
        _ value: Number,
        path: @autoclosure () -> [any CodingKey]
    ) throws -> JSONTree {
        .number(try JSONText.number(value, codingPath: path()))
    }
}

extension JSONTreeEncoder {
    struct KeyedContainer<Key: CodingKey>: KeyedIntegerForwarding {
        let encoder: JSONTreeEncoder
        let object: JSONObjectBox

        var codingPath: [any CodingKey] { encoder.codingPath }

        private func set(_ value: JSONTree, _ key: Key) {
            object.fields.append((key.stringValue, value))
        }

        mutating func encodeNil(forKey key: Key) throws { set(.null, key) }
        mutating func encode(_ value: Bool, forKey key: Key) throws { set(.bool(value), key) }
        mutating func encode(_ value: String, forKey key: Key) throws { set(.string(value), key) }
        mutating func encode(_ value: Double, forKey key: Key) throws {
            set(try JSONTreeEncoder.number(value, path: codingPath + [key]), key)
        }
        mutating func encode(_ value: Float, forKey key: Key) throws {
            set(try JSONTreeEncoder.number(value, path: codingPath + [key]), key)
        }
        mutating func encodeInteger(_ value: some FixedWidthInteger, forKey key: Key) throws {
            set(.number(value.description), key)
        }
        mutating func encode<Value: Encodable>(_ value: Value, forKey key: Key) throws {
            set(try JSONTreeEncoder.tree(of: value, parent: encoder, key: key), key)
        }

        /// A nested container asked for again under the same key continues the one given
        /// before, as Foundation's does.
        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type,
            forKey key: Key
        ) -> KeyedEncodingContainer<NestedKey> {
            let nested = JSONTreeEncoder(parent: encoder, key: key)
            if case .object(let box)? = lastValue(for: key) { nested.tree = .object(box) } else { set(.object(nested.objectBox()), key) }
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoder: nested, object: nested.objectBox()))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            let nested = JSONTreeEncoder(parent: encoder, key: key)
            if case .array(let box)? = lastValue(for: key) { nested.tree = .array(box) } else { set(.array(nested.arrayBox()), key) }
            return UnkeyedContainer(encoder: nested, array: nested.arrayBox())
        }

        private func lastValue(for key: Key) -> JSONTree? {
            let name = key.stringValue
            return object.fields.last { $0.key.utf8.elementsEqual(name.utf8) }?.value
        }

        mutating func superEncoder() -> any Encoder {
            superEncoder(named: SuperKey.super)
        }

        mutating func superEncoder(forKey key: Key) -> any Encoder {
            superEncoder(named: key)
        }

        private func superEncoder(named key: any CodingKey) -> any Encoder {
            let nested = JSONTreeEncoder(parent: encoder, key: key)
            object.fields.append((key.stringValue, .pending(nested.written)))
            return nested
        }
    }

    struct UnkeyedContainer: UnkeyedEncodingContainer, IntegerForwarding {
        let encoder: JSONTreeEncoder
        let array: JSONArrayBox

        var codingPath: [any CodingKey] { encoder.codingPath }
        var count: Int { array.elements.count }

        /// The key of the next element, for paths.
        private var nextKey: JSONIndexKey { JSONIndexKey(intValue: array.elements.count) }

        private func append(_ value: JSONTree) { array.elements.append(value) }

        mutating func encodeNil() throws { append(.null) }
        mutating func encode(_ value: Bool) throws { append(.bool(value)) }
        mutating func encode(_ value: String) throws { append(.string(value)) }
        mutating func encode(_ value: Double) throws { append(try JSONTreeEncoder.number(value, path: codingPath + [nextKey])) }
        mutating func encode(_ value: Float) throws { append(try JSONTreeEncoder.number(value, path: codingPath + [nextKey])) }
        mutating func encodeInteger(_ value: some FixedWidthInteger) throws { append(.number(value.description)) }
        mutating func encode<Value: Encodable>(_ value: Value) throws {
            append(try JSONTreeEncoder.tree(of: value, parent: encoder, key: nextKey))
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            let nested = JSONTreeEncoder(parent: encoder, key: nextKey)
            append(.object(nested.objectBox()))
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoder: nested, object: nested.objectBox()))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            let nested = JSONTreeEncoder(parent: encoder, key: nextKey)
            append(.array(nested.arrayBox()))
            return UnkeyedContainer(encoder: nested, array: nested.arrayBox())
        }

        mutating func superEncoder() -> any Encoder {
            let nested = JSONTreeEncoder(parent: encoder, key: nextKey)
            append(.pending(nested.written))
            return nested
        }
    }

    struct SingleValueContainer: SingleValueEncodingContainer, IntegerForwarding {
        let encoder: JSONTreeEncoder

        var codingPath: [any CodingKey] { encoder.codingPath }

        private func set(_ value: JSONTree) { encoder.tree = value }

        mutating func encodeNil() throws { set(.null) }
        mutating func encode(_ value: Bool) throws { set(.bool(value)) }
        mutating func encode(_ value: String) throws { set(.string(value)) }
        mutating func encode(_ value: Double) throws { set(try JSONTreeEncoder.number(value, path: codingPath)) }
        mutating func encode(_ value: Float) throws { set(try JSONTreeEncoder.number(value, path: codingPath)) }
        mutating func encodeInteger(_ value: some FixedWidthInteger) throws { set(.number(value.description)) }
        mutating func encode<Value: Encodable>(_ value: Value) throws {
            if let scalar = JSONTree.foundationForm(of: value) {
                set(scalar)
            } else {
                // The value's own containers write to this encoder: it is the same value.
                try value.encode(to: encoder)
            }
        }
    }
}

/// The key `superEncoder()` uses.
private enum SuperKey: String, CodingKey {
    case `super`
}

/// An array element's position, in coding paths.
struct JSONIndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { "Index \(intValue ?? 0)" }
    init(intValue: Int) { self.intValue = intValue }
    init?(stringValue: String) { nil }
}
