/// How scalars are written as JSON text: the forms Foundation's `JSONEncoder` writes, so that
/// every JSON writer of the service gives the same bytes for the same value.
public enum JSONText {
    /// Appends `text` as a JSON string: `"` and `\` escaped, control characters as `\b`, `\f`,
    /// `\n`, `\r`, `\t` or `\u00XX`, everything else (`/` and non-ASCII included) as it is.
    public static func appendString(_ text: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var copiedUpTo = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[copiedUpTo..<index]))
                copiedUpTo = index + 1
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[copiedUpTo...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// A JSON array of already-encoded elements, in order.
    public static func array(_ elements: [[UInt8]]) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(ascii: "[")]
        bytes.reserveCapacity(elements.reduce(2) { $0 + $1.count + 1 })
        for (index, element) in elements.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: element)
        }
        bytes.append(UInt8(ascii: "]"))
        return bytes
    }

    /// Appends an integer in decimal, as `description` writes it, without making a string.
    @inlinable
    public static func appendInteger(_ value: some FixedWidthInteger, to bytes: inout [UInt8]) {
        if let small = Int64(exactly: value) {
            if small < 0 { bytes.append(UInt8(ascii: "-")) }
            appendDigits(of: small.magnitude, to: &bytes)
        } else if let large = UInt64(exactly: value) {
            appendDigits(of: large, to: &bytes)
        } else {
            bytes.append(contentsOf: value.description.utf8)
        }
    }

    /// How many decimal digits `appendInteger` writes for `value`.
    @inlinable
    public static func decimalDigitCount(of value: UInt64) -> Int {
        var digits = 1
        var rest = value
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        return digits
    }

    @usableFromInline
    static func appendDigits(of magnitude: UInt64, to bytes: inout [UInt8]) {
        // 20 digits hold any UInt64.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var rest = magnitude
            var first = digits.count
            repeat {
                first -= 1
                digits[first] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest != 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[first...]))
        }
    }

    /// A finite floating-point number as JSON: Swift's shortest form, without a trailing `.0`.
    /// - Throws: `EncodingError.invalidValue` for NaN and the infinities, which JSON cannot hold.
    static func number<Number: BinaryFloatingPoint & CustomStringConvertible>(
        _ value: Number,
        codingPath: @autoclosure () -> [any CodingKey]
    ) throws -> String {
        guard value.isFinite else {
            throw EncodingError.invalidValue(
                value,
                .init(
                    codingPath: codingPath(),
                    debugDescription: "Unable to encode \(Number.self).\(value) directly in JSON."
                ))
        }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return text
    }

    /// An error for arrays and objects nested deeper than `JSONTree.maximumDepth`.
    static var nestedTooDeep: EncodingError {
        EncodingError.invalidValue(
            JSONTree.maximumDepth,
            .init(codingPath: [], debugDescription: "arrays and objects nest more than \(JSONTree.maximumDepth) deep")
        )
    }

    /// Whether `left` orders before `right` by their UTF-8 bytes: how object keys are sorted.
    static func keyPrecedes(_ left: String, _ right: String) -> Bool {
        left.utf8.lexicographicallyPrecedes(right.utf8)
    }
}
