/// RFC 6902 JSON Patch between two JSON documents, computed from their bytes.
///
/// The documents are read as they are written by the sorted-key encoder: equal values are equal
/// bytes, so unchanged parts are found by comparing bytes and never re-encoded; every value in a
/// patch is copied from the new document's bytes.
///
/// - Objects: a removed key is a `remove`, a new one an `add`, a changed one patched in place
///   (deeper, where both values are containers of the same kind).
/// - Arrays whose elements are all objects with distinct `id` fields are matched by id: a removed
///   element is a `remove`, a new one an `add`, one that moved a `move`, and a kept one is patched
///   in place, so toggling one task of a long list is one `replace`.
/// - Other arrays are matched by position.
public enum JSONPatch {
    /// The patch that turns `old` into `new`, as a JSON array of operations (sorted keys); nil
    /// when either is not a JSON document.
    public static func diff(from old: [UInt8], to new: [UInt8]) -> [UInt8]? {
        guard let before = JSONNode.parse(old), let after = JSONNode.parse(new) else { return nil }
        var writer = PatchWriter(old: old, new: new)
        writer.diff(before, after, path: [])
        return writer.finish()
    }
}

/// A parsed JSON value: where its bytes are, and for containers, its parts.
struct JSONNode {
    enum Kind {
        case scalar
        case object([(key: String, value: JSONNode)])
        case array([JSONNode])
    }

    let kind: Kind
    /// Its bytes in the document.
    let range: Range<Int>

    /// Parses a whole document; nil when it is not exactly one JSON value (spaces around it aside).
    static func parse(_ bytes: [UInt8]) -> JSONNode? {
        var parser = JSONParser(bytes: bytes)
        guard let node = parser.value(depth: 0) else { return nil }
        parser.skipSpaces()
        return parser.offset == bytes.count ? node : nil
    }
}

/// A small recursive-descent JSON parser that keeps each value's byte range.
private struct JSONParser {
    let bytes: [UInt8]
    var offset = 0
    /// Deeper documents are refused rather than risking the stack.
    static let depthLimit = 512

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func skipSpaces() {
        while offset < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[offset]) { offset += 1 }
    }

    mutating func value(depth: Int) -> JSONNode? {
        guard depth < Self.depthLimit else { return nil }
        skipSpaces()
        guard offset < bytes.count else { return nil }
        let start = offset
        switch bytes[offset] {
        case UInt8(ascii: "{"):
            offset += 1
            var members: [(key: String, value: JSONNode)] = []
            skipSpaces()
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "}") {
                offset += 1
                return JSONNode(kind: .object([]), range: start..<offset)
            }
            while true {
                skipSpaces()
                guard let key = string() else { return nil }
                skipSpaces()
                guard offset < bytes.count, bytes[offset] == UInt8(ascii: ":") else { return nil }
                offset += 1
                guard let member = value(depth: depth + 1) else { return nil }
                members.append((key, member))
                guard let more = separator(closing: UInt8(ascii: "}")) else { return nil }
                if !more { return JSONNode(kind: .object(members), range: start..<offset) }
            }
        case UInt8(ascii: "["):
            offset += 1
            var elements: [JSONNode] = []
            skipSpaces()
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "]") {
                offset += 1
                return JSONNode(kind: .array([]), range: start..<offset)
            }
            while true {
                guard let element = value(depth: depth + 1) else { return nil }
                elements.append(element)
                guard let more = separator(closing: UInt8(ascii: "]")) else { return nil }
                if !more { return JSONNode(kind: .array(elements), range: start..<offset) }
            }
        case UInt8(ascii: "\""):
            // A value's text is compared as bytes, never read: checked, not decoded.
            guard skipString() else { return nil }
            return JSONNode(kind: .scalar, range: start..<offset)
        default:
            // A number, true, false or null: the run of characters that can spell one.
            while offset < bytes.count, Self.isScalarCharacter(bytes[offset]) { offset += 1 }
            let text = bytes[start..<offset]
            guard !text.isEmpty, Self.isLiteralOrNumber(text) else { return nil }
            return JSONNode(kind: .scalar, range: start..<offset)
        }
    }

    /// After a member or element: moves past a comma (true: another follows) or `closing` (false:
    /// the container ends); nil for anything else.
    private mutating func separator(closing: UInt8) -> Bool? {
        skipSpaces()
        guard offset < bytes.count, bytes[offset] == UInt8(ascii: ",") || bytes[offset] == closing else { return nil }
        offset += 1
        return bytes[offset - 1] == UInt8(ascii: ",")
    }

    private static func isScalarCharacter(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x61...0x7A).contains(byte) || byte == UInt8(ascii: "-")
            || byte == UInt8(ascii: "+") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "E")
    }

    private static func isLiteralOrNumber(_ text: ArraySlice<UInt8>) -> Bool {
        if text.elementsEqual("true".utf8) || text.elementsEqual("false".utf8) || text.elementsEqual("null".utf8) {
            return true
        }
        guard let first = text.first, first == UInt8(ascii: "-") || (0x30...0x39).contains(first) else { return false }
        return Double(String(decoding: text, as: UTF8.self)) != nil
    }

    /// Moves past a well-formed string at the offset; false when there is none.
    mutating func skipString() -> Bool {
        guard offset < bytes.count, bytes[offset] == UInt8(ascii: "\"") else { return false }
        let start = offset
        offset += 1
        while offset < bytes.count {
            let byte = bytes[offset]
            offset += 1
            if byte == UInt8(ascii: "\"") { return true }
            if byte == UInt8(ascii: "\\") {
                // A string with escapes is checked by decoding it (rare in states).
                offset = start
                return string() != nil
            }
            guard byte >= 0x20 else { return false }
        }
        return false
    }

    /// A string at the offset, decoded; nil when there is none or it is malformed.
    mutating func string() -> String? {
        guard offset < bytes.count, bytes[offset] == UInt8(ascii: "\"") else { return nil }
        offset += 1
        var decoded: [UInt8] = []
        while offset < bytes.count {
            let byte = bytes[offset]
            offset += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(validating: decoded, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard offset < bytes.count else { return nil }
                let escaped = bytes[offset]
                offset += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escaped)
                case UInt8(ascii: "b"): decoded.append(0x08)
                case UInt8(ascii: "f"): decoded.append(0x0C)
                case UInt8(ascii: "n"): decoded.append(0x0A)
                case UInt8(ascii: "r"): decoded.append(0x0D)
                case UInt8(ascii: "t"): decoded.append(0x09)
                case UInt8(ascii: "u"):
                    guard var scalar = hexQuad() else { return nil }
                    if (0xD800..<0xDC00).contains(scalar) {
                        // A high surrogate must be followed by its low one.
                        guard offset + 1 < bytes.count, bytes[offset] == UInt8(ascii: "\\"), bytes[offset + 1] == UInt8(ascii: "u") else {
                            return nil
                        }
                        offset += 2
                        guard let low = hexQuad(), (0xDC00..<0xE000).contains(low) else { return nil }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { return nil }
                    decoded.append(contentsOf: String(unicode).utf8)
                default:
                    return nil
                }
            default:
                guard byte >= 0x20 else { return nil }
                decoded.append(byte)
            }
        }
        return nil
    }

    private mutating func hexQuad() -> UInt32? {
        guard offset + 4 <= bytes.count,
            let value = UInt32(String(decoding: bytes[offset..<offset + 4], as: UTF8.self), radix: 16)
        else { return nil }
        offset += 4
        return value
    }
}

/// The bytes of an array element's `id` value, hashed in one go.
private struct ElementID: Hashable {
    let bytes: [UInt8]

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}

/// Writes the operations of one patch.
private struct PatchWriter {
    let old: [UInt8]
    let new: [UInt8]
    private var bytes: [UInt8] = [UInt8(ascii: "[")]
    private var isEmpty = true

    init(old: [UInt8], new: [UInt8]) {
        self.old = old
        self.new = new
    }

    mutating func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "]"))
        return bytes
    }

    /// The operations that turn `before` (in `old`) into `after` (in `new`) at `path`.
    mutating func diff(_ before: JSONNode, _ after: JSONNode, path: [String]) {
        if old[before.range].elementsEqual(new[after.range]) { return }
        switch (before.kind, after.kind) {
        case (.object(let beforeMembers), .object(let afterMembers)):
            diffObjects(beforeMembers, afterMembers, path: path)
        case (.array(let beforeElements), .array(let afterElements)):
            if let beforeKeys = Self.ids(beforeElements, in: old), let afterKeys = Self.ids(afterElements, in: new) {
                diffKeyedArrays(beforeElements, beforeKeys, afterElements, afterKeys, path: path)
            } else {
                diffArrays(beforeElements, afterElements, path: path)
            }
        default:
            operation("replace", path: path, value: after.range)
        }
    }

    private mutating func diffObjects(
        _ before: [(key: String, value: JSONNode)], _ after: [(key: String, value: JSONNode)],
        path: [String]
    ) {
        var afterByKey: [String: JSONNode] = [:]
        for member in after { afterByKey[member.key] = member.value }
        var beforeByKey: [String: JSONNode] = [:]
        for member in before {
            beforeByKey[member.key] = member.value
            if afterByKey[member.key] == nil { operation("remove", path: path + [member.key]) }
        }
        for member in after {
            if let previous = beforeByKey[member.key] {
                diff(previous, member.value, path: path + [member.key])
            } else {
                operation("add", path: path + [member.key], value: member.value.range)
            }
        }
    }

    private mutating func diffArrays(_ before: [JSONNode], _ after: [JSONNode], path: [String]) {
        let common = min(before.count, after.count)
        for index in 0..<common { diff(before[index], after[index], path: path + [String(index)]) }
        // Removed from the end backwards, so each index is still valid when it is removed.
        if before.count > after.count {
            for index in (after.count..<before.count).reversed() { operation("remove", path: path + [String(index)]) }
        }
        for index in common..<after.count { operation("add", path: path + [String(index)], value: after[index].range) }
    }

    /// Arrays of objects matched by their `id`: removals first (backwards); then, position by
    /// position of the new array, an element is added, moved into place, or patched in place.
    /// The kept elements of the longest run already in the new order stay where they are; only
    /// the others move (an element in the way of its position is first moved to the end, once),
    /// so a swap of two elements is a few moves whatever the array's length.
    private mutating func diffKeyedArrays(
        _ before: [JSONNode], _ beforeKeys: [ElementID],
        _ after: [JSONNode], _ afterKeys: [ElementID], path: [String]
    ) {
        if beforeKeys == afterKeys {
            // The same elements in the same order (a field of one changed): each patched in place.
            for index in 0..<after.count { diff(before[index], after[index], path: path + [String(index)]) }
            return
        }
        var newIndex: [ElementID: Int] = [:]
        for (index, key) in afterKeys.enumerated() { newIndex[key] = index }
        var working: [(key: ElementID, node: JSONNode)] = []
        for index in (0..<before.count).reversed() where newIndex[beforeKeys[index]] == nil {
            operation("remove", path: path + [String(index)])
        }
        for index in 0..<before.count where newIndex[beforeKeys[index]] != nil {
            working.append((beforeKeys[index], before[index]))
        }
        let staying = Self.longestIncreasingRun(working.map { newIndex[$0.key]! })
        var stays = Set<ElementID>()
        for position in staying { stays.insert(working[position].key) }
        var parked = Set<ElementID>()
        for index in 0..<after.count {
            let key = afterKeys[index]
            // A moving element that belongs further on: out of the way, to the end.
            while index < working.count - 1, working[index].key != key, !stays.contains(working[index].key),
                newIndex[working[index].key]! > index, parked.insert(working[index].key).inserted
            {
                operation("move", path: path + [String(working.count - 1)], from: path + [String(index)])
                working.append(working.remove(at: index))
            }
            if index < working.count, working[index].key == key {
                diff(working[index].node, after[index], path: path + [String(index)])
            } else if let from = working[index...].firstIndex(where: { $0.key == key }) {
                operation("move", path: path + [String(index)], from: path + [String(from)])
                let moved = working.remove(at: from)
                working.insert(moved, at: index)
                diff(moved.node, after[index], path: path + [String(index)])
            } else {
                operation("add", path: path + [String(index)], value: after[index].range)
                working.insert((key, after[index]), at: index)
            }
        }
    }

    /// The positions in `values` of one longest strictly increasing subsequence.
    private static func longestIncreasingRun(_ values: [Int]) -> [Int] {
        // tails[k]: the position of the smallest last value of an increasing run of length k + 1.
        var tails: [Int] = []
        var previous = [Int](repeating: -1, count: values.count)
        for (position, value) in values.enumerated() {
            var low = 0
            var high = tails.count
            while low < high {
                let middle = (low + high) / 2
                if values[tails[middle]] < value { low = middle + 1 } else { high = middle }
            }
            if low > 0 { previous[position] = tails[low - 1] }
            if low == tails.count { tails.append(position) } else { tails[low] = position }
        }
        var run: [Int] = []
        var position = tails.last ?? -1
        while position >= 0 {
            run.append(position)
            position = previous[position]
        }
        return run.reversed()
    }

    /// The bytes of each element's `id` value, when every element is an object with one and no
    /// two are equal; nil otherwise.
    private static func ids(_ elements: [JSONNode], in document: [UInt8]) -> [ElementID]? {
        guard !elements.isEmpty else { return nil }
        var ids: [ElementID] = []
        ids.reserveCapacity(elements.count)
        for element in elements {
            guard case .object(let members) = element.kind, let id = members.first(where: { $0.key == "id" }) else { return nil }
            ids.append(ElementID(bytes: Array(document[id.value.range])))
        }
        return Set(ids).count == ids.count ? ids : nil
    }

    // MARK: Writing operations

    /// One operation, its keys in sorted order: `from`, `op`, `path`, `value`.
    private mutating func operation(_ op: String, path: [String], from: [String]? = nil, value: Range<Int>? = nil) {
        bytes.append(contentsOf: isEmpty ? "{".utf8 : ",{".utf8)
        isEmpty = false
        if let from {
            bytes.append(contentsOf: "\"from\":".utf8)
            JSONText.appendString(Self.pointer(from), to: &bytes)
            bytes.append(UInt8(ascii: ","))
        }
        bytes.append(contentsOf: "\"op\":".utf8)
        JSONText.appendString(op, to: &bytes)
        bytes.append(contentsOf: ",\"path\":".utf8)
        JSONText.appendString(Self.pointer(path), to: &bytes)
        if let value {
            bytes.append(contentsOf: ",\"value\":".utf8)
            bytes.append(contentsOf: new[value])
        }
        bytes.append(UInt8(ascii: "}"))
    }

    /// A JSON Pointer (RFC 6901): each token with `~` as `~0` and `/` as `~1`.
    static func pointer(_ tokens: [String]) -> String {
        var pointer = ""
        for token in tokens {
            pointer += "/"
            pointer += token.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
        }
        return pointer
    }
}

extension String {
    /// The string with every occurrence of `target` replaced (without Foundation).
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        guard contains(target) else { return self }
        var result = ""
        var rest = self[...]
        while let found = rest.firstRange(of: target) {
            result += rest[..<found.lowerBound]
            result += replacement
            rest = rest[found.upperBound...]
        }
        return result + rest
    }
}
