import Foundation

/// The fast path of `SortedJSONEncoder`: writes JSON bytes while the value's `encode(to:)` runs,
/// and sorts each object's fields in place once the object is done — no value built in between.
///
/// It relies on containers being used in nesting order: a nested value or container is finished
/// before its parent writes again. Synthesized `Codable` and almost every hand-written
/// `encode(to:)` work that way. Anything else — writing to a container after a later sibling
/// was written, super encoders, two single values for one value — marks the encoding `misused`,
/// and `SortedJSONEncoder` encodes the value again with `JSONTreeEncoder`, which takes any order.
final class JSONStreamEncoder: Encoder {
    // `@exclusivity(unchecked)` on the stored properties: an encoder lives for one `encode` call
    // on one thread, and no method holds an access to a property across a call that reaches the
    // same property (`JSONText.appendString` gets `&bytes` and only appends to it; user code
    // runs between accesses, never inside one). The run-time checks could never fire, and they
    // took a third of the time of encoding a state.

    /// The JSON written so far.
    @exclusivity(unchecked) private(set) var bytes: [UInt8] = []
    /// Whether the value used its containers in a way this encoder cannot follow.
    @exclusivity(unchecked) private(set) var misused = false

    /// An object or array whose closing bracket is not written yet.
    private struct Frame {
        let id: Int
        let isObject: Bool
        /// Where its `{` or `[` is in `bytes`.
        let start: Int
        /// Its first field in `fields`.
        let firstField: Int
        var count = 0
        /// Whether its keys so far are in strictly increasing order (nothing to sort).
        var isSorted = true
    }

    /// A field of an open object: its key and where it starts in `bytes` (its key's quote).
    private struct Field {
        let key: String
        let start: Int
    }

    /// A value being encoded: where it started and what it has written.
    private struct Slot {
        /// Its key or index in its parent, for `codingPath`; nil for the top level and for a value
        /// standing for another (a single value container's `encode`).
        let key: (any CodingKey)?
        /// How many frames were open when it started; it may write only to frames from here on.
        let depth: Int
        /// The object or array it opened.
        var frameID: Int?
        /// Whether it wrote a single value.
        var isWritten = false
    }

    /// Open objects and arrays, innermost last.
    @exclusivity(unchecked) private var frames: [Frame] = []
    /// The fields of the open objects, in the order written.
    @exclusivity(unchecked) private var fields: [Field] = []
    /// The values being encoded, innermost last.
    @exclusivity(unchecked) private var slots: [Slot] = []
    @exclusivity(unchecked) private var lastFrameID = 0

    private init() {
        bytes.reserveCapacity(256)
        // Enough for most states' nesting without growing step by step.
        frames.reserveCapacity(8)
        fields.reserveCapacity(16)
        slots.reserveCapacity(8)
    }

    /// The JSON of `value`, or nil when it used its containers out of order.
    /// - Throws: what `SortedJSONEncoder.encode` throws.
    static func encode<Value: Encodable>(_ value: Value) throws -> [UInt8]? {
        let encoder = JSONStreamEncoder()
        let wroteSomething = try encoder.encodeValue(value, key: nil, emptyAsObject: false)
        if encoder.misused { return nil }
        guard wroteSomething else { throw SortedJSONEncoder.nothingEncoded(value) }
        return encoder.bytes
    }

    // MARK: - Encoder

    /// The keys from the top-level value down to the value being encoded.
    var codingPath: [any CodingKey] { slots.compactMap(\.key) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedContainer<Key>(encoder: self, frameID: openFrameForValue(isObject: true)))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedContainer(encoder: self, frameID: openFrameForValue(isObject: false))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueContainer(encoder: self)
    }

    // MARK: - Values

    /// Encodes `value` at the current position (after its key or comma); `{}` if it writes nothing
    /// and `emptyAsObject`. Returns whether it wrote anything.
    @discardableResult
    fileprivate func encodeValue<Value: Encodable>(_ value: Value, key: (any CodingKey)?, emptyAsObject: Bool = true) throws -> Bool {
        if misused { return true }
        if let scalar = JSONTree.foundationForm(of: value) {
            try scalar.write(to: &bytes)
            return true
        }
        slots.append(Slot(key: key, depth: frames.count))
        try value.encode(to: self)
        let slot = slots.removeLast()
        if misused { return true }
        if let id = slot.frameID {
            // Its frame must be the first one it opened, still open; close it and any container
            // nested in it that was left open.
            guard frames.count > slot.depth, frames[slot.depth].id == id else {
                misuse()
                return true
            }
            while frames.count > slot.depth { closeInnermostFrame() }
            return true
        }
        if slot.isWritten { return true }
        if emptyAsObject { bytes.append(contentsOf: "{}".utf8) }
        return emptyAsObject
    }

    /// Opens the object or array of the value being encoded (`container(keyedBy:)` or
    /// `unkeyedContainer()`); a second request of the same kind gets the same one.
    private func openFrameForValue(isObject: Bool) -> Int {
        guard !misused, let slot = slots.last else { return Self.noFrame }
        if let id = slot.frameID {
            guard frames.count > slot.depth, frames[slot.depth].id == id, frames[slot.depth].isObject == isObject else {
                misuse()
                return Self.noFrame
            }
            return id
        }
        guard !slot.isWritten, frames.count == slot.depth else {
            misuse()
            return Self.noFrame
        }
        let id = openFrame(isObject: isObject)
        slots[slots.count - 1].frameID = id
        return id
    }

    private func openFrame(isObject: Bool) -> Int {
        // As deep as Foundation's limit: the tree encoder reports it.
        guard frames.count + 1 < JSONTree.maximumDepth else {
            misuse()
            return Self.noFrame
        }
        lastFrameID += 1
        frames.append(Frame(id: lastFrameID, isObject: isObject, start: bytes.count, firstField: fields.count))
        bytes.append(isObject ? UInt8(ascii: "{") : UInt8(ascii: "["))
        return lastFrameID
    }

    /// A frame id no frame has, for containers handed out once the encoding is misused.
    fileprivate static let noFrame = -1

    private func misuse() {
        misused = true
    }

    // MARK: - Writing into frames

    /// Gets the frame `id` ready for its next field or element: closes the containers nested in
    /// it that were left open and writes the comma. Returns the frame's index, or nil (and marks
    /// the encoding misused) when that is not the frame the value being encoded may write to.
    private func prepareEntry(in id: Int) -> Int? {
        guard !misused, let index = frames.lastIndex(where: { $0.id == id }) else {
            misuse()
            return nil
        }
        // The value being encoded writes only to frames it opened: writing to an outer one would
        // put bytes inside the value's own.
        if let slot = slots.last, index < slot.depth {
            misuse()
            return nil
        }
        while frames.count > index + 1 { closeInnermostFrame() }
        if frames[index].count > 0 { bytes.append(UInt8(ascii: ",")) }
        frames[index].count += 1
        return index
    }

    /// Writes `"key":` as the next field of object `id`; false if the encoding is misused.
    fileprivate func beginField(_ key: some CodingKey, in id: Int) -> Bool {
        guard let index = prepareEntry(in: id) else { return false }
        let name = key.stringValue
        let count = frames[index].count
        if count > 1, frames[index].isSorted, !JSONText.keyPrecedes(fields[fields.count - 1].key, name) {
            frames[index].isSorted = false
        }
        fields.append(Field(key: name, start: bytes.count))
        JSONText.appendString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        return true
    }

    /// Marks the encoding misused when object `id` already has a field `key`: a nested container
    /// asked for again continues the first one, whose bytes are already written.
    fileprivate func refuseSecondNestedContainer(for key: some CodingKey, in id: Int) {
        guard !misused, let frame = frames.last(where: { $0.id == id }) else { return }
        let name = key.stringValue
        if fields[frame.firstField...].contains(where: { $0.key.utf8.elementsEqual(name.utf8) }) { misuse() }
    }

    /// Writes the comma before the next element of array `id`; false if the encoding is misused.
    fileprivate func beginElement(in id: Int) -> Bool {
        prepareEntry(in: id) != nil
    }

    fileprivate func elementCount(of id: Int) -> Int {
        frames.last(where: { $0.id == id })?.count ?? 0
    }

    /// Opens an object or array nested in frame `id` after its key or comma was written.
    fileprivate func openNestedFrame(isObject: Bool) -> Int {
        misused ? Self.noFrame : openFrame(isObject: isObject)
    }

    /// Claims the value being encoded for one single value; false (and misused) if it already
    /// has one or opened a container.
    fileprivate func claimSingleValue() -> Bool {
        guard !misused, let slot = slots.last, !slot.isWritten, slot.frameID == nil, frames.count == slot.depth else {
            misuse()
            return false
        }
        slots[slots.count - 1].isWritten = true
        return true
    }

    fileprivate func write(_ text: String) { bytes.append(contentsOf: text.utf8) }
    fileprivate func write(string: String) { JSONText.appendString(string, to: &bytes) }
    fileprivate func write(integer: some FixedWidthInteger) { JSONText.appendInteger(integer, to: &bytes) }

    fileprivate func superEncoderMisused() -> any Encoder {
        misuse()
        // Whatever is written to it is thrown away: the value is encoded again by the tree encoder.
        return JSONTreeEncoder(parent: nil, key: nil)
    }

    // MARK: - Closing

    private func closeInnermostFrame() {
        let frame = frames.removeLast()
        guard frame.isObject else {
            bytes.append(UInt8(ascii: "]"))
            return
        }
        if !frame.isSorted { sortFields(of: frame) }
        fields.removeLast(fields.count - frame.firstField)
        bytes.append(UInt8(ascii: "}"))
    }

    /// Rewrites the fields of `frame` (the innermost, not yet closed) ordered by key, keeping the
    /// last of equal keys. The bytes and the order are staged in temporary buffers (on the stack
    /// for small objects).
    private func sortFields(of frame: Frame) {
        let first = frame.firstField
        let count = fields.count - first
        let contentStart = frame.start + 1
        let contentCount = bytes.count - contentStart
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: contentCount) { content in
            _ = content.initialize(fromContentsOf: bytes[contentStart...])
            withUnsafeTemporaryAllocation(of: Int.self, capacity: count) { order in
                // Field positions in `fields`, stably sorted by key: of equal keys the last one
                // written comes last.
                for next in 0..<count {
                    var slot = next
                    while slot > 0, JSONText.keyPrecedes(fields[first + next].key, fields[first + order[slot - 1]].key) {
                        order[slot] = order[slot - 1]
                        slot -= 1
                    }
                    order[slot] = next
                }
                bytes.removeSubrange(contentStart...)
                var wroteOne = false
                for rank in 0..<count {
                    let field = first + order[rank]
                    if rank + 1 < count, fields[first + order[rank + 1]].key.utf8.elementsEqual(fields[field].key.utf8) { continue }
                    if wroteOne { bytes.append(UInt8(ascii: ",")) }
                    wroteOne = true
                    // A field runs from its key's quote to the comma before the next one.
                    let end = field + 1 < fields.count ? fields[field + 1].start - 1 : contentStart + contentCount
                    bytes.append(
                        contentsOf: UnsafeBufferPointer(rebasing: content[(fields[field].start - contentStart)..<(end - contentStart)]))
                }
            }
        }
    }
}

// MARK: - Containers

extension JSONStreamEncoder {
    struct KeyedContainer<Key: CodingKey>: KeyedIntegerForwarding {
        let encoder: JSONStreamEncoder
        let frameID: Int
        /// The keys of the containers this one is nested in, below the value's own.
        var nestedKeys: [any CodingKey] = []

        /// Written to only while its value is the one being encoded, so its path is the encoder's.
        var codingPath: [any CodingKey] { encoder.codingPath + nestedKeys }

        private func scalar(_ text: String, _ key: Key) {
            if encoder.beginField(key, in: frameID) { encoder.write(text) }
        }

        mutating func encodeInteger(_ value: some FixedWidthInteger, forKey key: Key) throws {
            if encoder.beginField(key, in: frameID) { encoder.write(integer: value) }
        }

        mutating func encodeNil(forKey key: Key) throws { scalar("null", key) }
        mutating func encode(_ value: Bool, forKey key: Key) throws { scalar(value ? "true" : "false", key) }
        mutating func encode(_ value: String, forKey key: Key) throws {
            if encoder.beginField(key, in: frameID) { encoder.write(string: value) }
        }
        mutating func encode(_ value: Double, forKey key: Key) throws {
            try scalar(JSONText.number(value, codingPath: codingPath + [key]), key)
        }
        mutating func encode(_ value: Float, forKey key: Key) throws {
            try scalar(JSONText.number(value, codingPath: codingPath + [key]), key)
        }
        mutating func encode<Value: Encodable>(_ value: Value, forKey key: Key) throws {
            if encoder.beginField(key, in: frameID) { try encoder.encodeValue(value, key: key) }
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type,
            forKey key: Key
        ) -> KeyedEncodingContainer<NestedKey> {
            encoder.refuseSecondNestedContainer(for: key, in: frameID)
            let began = encoder.beginField(key, in: frameID)
            let nested = began ? encoder.openNestedFrame(isObject: true) : JSONStreamEncoder.noFrame
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoder: encoder, frameID: nested, nestedKeys: nestedKeys + [key]))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            encoder.refuseSecondNestedContainer(for: key, in: frameID)
            let began = encoder.beginField(key, in: frameID)
            let nested = began ? encoder.openNestedFrame(isObject: false) : JSONStreamEncoder.noFrame
            return UnkeyedContainer(encoder: encoder, frameID: nested, nestedKeys: nestedKeys + [key])
        }

        mutating func superEncoder() -> any Encoder { encoder.superEncoderMisused() }
        mutating func superEncoder(forKey key: Key) -> any Encoder { encoder.superEncoderMisused() }
    }

    struct UnkeyedContainer: UnkeyedEncodingContainer, IntegerForwarding {
        let encoder: JSONStreamEncoder
        let frameID: Int
        /// The keys of the containers this one is nested in, below the value's own.
        var nestedKeys: [any CodingKey] = []

        /// Written to only while its value is the one being encoded, so its path is the encoder's.
        var codingPath: [any CodingKey] { encoder.codingPath + nestedKeys }

        var count: Int { encoder.elementCount(of: frameID) }

        private var nextKey: JSONIndexKey { JSONIndexKey(intValue: count) }

        private func scalar(_ text: String) {
            if encoder.beginElement(in: frameID) { encoder.write(text) }
        }

        mutating func encodeInteger(_ value: some FixedWidthInteger) throws {
            if encoder.beginElement(in: frameID) { encoder.write(integer: value) }
        }

        mutating func encodeNil() throws { scalar("null") }
        mutating func encode(_ value: Bool) throws { scalar(value ? "true" : "false") }
        mutating func encode(_ value: String) throws {
            if encoder.beginElement(in: frameID) { encoder.write(string: value) }
        }
        mutating func encode(_ value: Double) throws { try scalar(JSONText.number(value, codingPath: codingPath + [nextKey])) }
        mutating func encode(_ value: Float) throws { try scalar(JSONText.number(value, codingPath: codingPath + [nextKey])) }
        mutating func encode<Value: Encodable>(_ value: Value) throws {
            let key = nextKey
            if encoder.beginElement(in: frameID) { try encoder.encodeValue(value, key: key) }
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            let key = nextKey
            let began = encoder.beginElement(in: frameID)
            let nested = began ? encoder.openNestedFrame(isObject: true) : JSONStreamEncoder.noFrame
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoder: encoder, frameID: nested, nestedKeys: nestedKeys + [key]))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            let key = nextKey
            let began = encoder.beginElement(in: frameID)
            let nested = began ? encoder.openNestedFrame(isObject: false) : JSONStreamEncoder.noFrame
            return UnkeyedContainer(encoder: encoder, frameID: nested, nestedKeys: nestedKeys + [key])
        }

        mutating func superEncoder() -> any Encoder { encoder.superEncoderMisused() }
    }

    struct SingleValueContainer: SingleValueEncodingContainer, IntegerForwarding {
        let encoder: JSONStreamEncoder

        var codingPath: [any CodingKey] { encoder.codingPath }

        private func scalar(_ text: String) {
            if encoder.claimSingleValue() { encoder.write(text) }
        }

        mutating func encodeInteger(_ value: some FixedWidthInteger) throws {
            if encoder.claimSingleValue() { encoder.write(integer: value) }
        }

        mutating func encodeNil() throws { scalar("null") }
        mutating func encode(_ value: Bool) throws { scalar(value ? "true" : "false") }
        mutating func encode(_ value: String) throws {
            if encoder.claimSingleValue() { encoder.write(string: value) }
        }
        mutating func encode(_ value: Double) throws { scalar(try JSONText.number(value, codingPath: codingPath)) }
        mutating func encode(_ value: Float) throws { scalar(try JSONText.number(value, codingPath: codingPath)) }
        mutating func encode<Value: Encodable>(_ value: Value) throws {
            // The value stands for this one: it writes at the same place.
            if encoder.claimSingleValue() { try encoder.encodeValue(value, key: nil) }
        }
    }
}
