/// Percent-decoding for paths and query strings.
enum PercentDecoding {
    /// Decodes `%HH` escapes (and `+` as space when `plusAsSpace`). Returns `nil` when an escape
    /// is malformed or the result is not UTF-8; callers then keep the raw text.
    static func decode(_ text: Substring, plusAsSpace: Bool) -> String? {
        let utf8 = text.utf8
        let isEscape = { (byte: UInt8) in byte == UInt8(ascii: "%") || (plusAsSpace && byte == UInt8(ascii: "+")) }
        guard utf8.withContiguousStorageIfAvailable({ $0.contains(where: isEscape) }) ?? utf8.contains(where: isEscape) else {
            return String(text)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var index = utf8.startIndex
        while index != utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "%") {
                let first = utf8.index(after: index)
                guard first != utf8.endIndex else { return nil }
                let second = utf8.index(after: first)
                guard second != utf8.endIndex,
                    let high = hexValue(utf8[first]), let low = hexValue(utf8[second])
                else { return nil }
                bytes.append(high << 4 | low)
                index = utf8.index(after: second)
                continue
            }
            bytes.append(plusAsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            index = utf8.index(after: index)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Decodes, keeping the raw text when it cannot be decoded.
    static func decodeOrKeep(_ text: Substring, plusAsSpace: Bool) -> String {
        decode(text, plusAsSpace: plusAsSpace) ?? String(text)
    }

    /// A path segment's bytes as sent, percent-decoded (`+` stays `+`), or kept as they are when
    /// an escape is malformed.
    static func decodeOrKeep(pathSegment bytes: UnsafeBufferPointer<UInt8>) -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        return bytes.contains(UInt8(ascii: "%")) ? decodeOrKeep(text[...], plusAsSpace: false) : text
    }

    /// Parses `a=1&b=x+y`: names and values percent-decoded, `+` as space, the last value of a
    /// repeated name kept (and the name noted).
    static func query(_ query: Substring) -> QueryParameters {
        var result = QueryParameters()
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            result.add(
                decodeOrKeep(parts[0], plusAsSpace: true), parts.count > 1 ? decodeOrKeep(parts[1], plusAsSpace: true) : "")
        }
        return result
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
