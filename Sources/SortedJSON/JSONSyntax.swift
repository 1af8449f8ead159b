/// Checks that bytes are one JSON value (RFC 8259), without building anything: what a store gives
/// back is checked this way before it is sent as it is.
package enum JSONSyntax {
    /// Containers nested deeper than this are refused rather than risking the stack.
    package static let depthLimit = 512

    /// Whether `bytes` are exactly one JSON value, with whitespace around it allowed. Strings are
    /// checked for their escapes and control characters, not for UTF-8 (check that apart).
    /// Without `lineBreaks`, whitespace is spaces and tabs only: the value is on one line (a
    /// string cannot hold a line break unescaped).
    package static func isValid(_ bytes: [UInt8], lineBreaks: Bool = true) -> Bool {
        bytes.withUnsafeBufferPointer { buffer in
            var scanner = Scanner(bytes: buffer, lineBreaks: lineBreaks)
            guard scanner.value(depth: 0) else { return false }
            scanner.skipWhitespace()
            return scanner.offset == buffer.count
        }
    }

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        let lineBreaks: Bool
        var offset = 0

        init(bytes: UnsafeBufferPointer<UInt8>, lineBreaks: Bool) {
            self.bytes = bytes
            self.lineBreaks = lineBreaks
        }

        private var current: UInt8? { offset < bytes.count ? bytes[offset] : nil }

        mutating func skipWhitespace() {
            while let byte = current, byte == 0x20 || byte == 0x09 || (lineBreaks && (byte == 0x0A || byte == 0x0D)) {
                offset += 1
            }
        }

        /// Moves past `byte` when it is next.
        private mutating func take(_ byte: UInt8) -> Bool {
            guard current == byte else { return false }
            offset += 1
            return true
        }

        mutating func value(depth: Int) -> Bool {
            skipWhitespace()
            switch current {
            case UInt8(ascii: "{")?:
                return container(depth: depth, closing: UInt8(ascii: "}")) { scanner in
                    scanner.skipWhitespace()
                    guard scanner.string() else { return false }
                    scanner.skipWhitespace()
                    return scanner.take(UInt8(ascii: ":")) && scanner.value(depth: depth + 1)
                }
            case UInt8(ascii: "[")?:
                return container(depth: depth, closing: UInt8(ascii: "]")) { $0.value(depth: depth + 1) }
            case UInt8(ascii: "\"")?:
                return string()
            case UInt8(ascii: "t")?:
                return literal("true")
            case UInt8(ascii: "f")?:
                return literal("false")
            case UInt8(ascii: "n")?:
                return literal("null")
            case .some:
                return number()
            case nil:
                return false
            }
        }

        /// At an opening bracket: the members `member` moves past, separated by commas, then `closing`.
        private mutating func container(depth: Int, closing: UInt8, member: (inout Scanner) -> Bool) -> Bool {
            guard depth < JSONSyntax.depthLimit else { return false }
            offset += 1
            skipWhitespace()
            if take(closing) { return true }
            repeat {
                guard member(&self) else { return false }
                skipWhitespace()
            } while take(UInt8(ascii: ","))
            return take(closing)
        }

        private mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard offset + count <= bytes.count else { return false }
            for index in 0..<count where bytes[offset + index] != word.utf8Start[index] { return false }
            offset += count
            return true
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
        private mutating func number() -> Bool {
            _ = take(UInt8(ascii: "-"))
            if !take(UInt8(ascii: "0")) {
                guard let first = current, (0x31...0x39).contains(first) else { return false }
                skipDigits()
            }
            if take(UInt8(ascii: ".")) {
                guard skipDigits() else { return false }
            }
            if take(UInt8(ascii: "e")) || take(UInt8(ascii: "E")) {
                _ = take(UInt8(ascii: "+")) || take(UInt8(ascii: "-"))
                guard skipDigits() else { return false }
            }
            return true
        }

        /// Moves past a run of digits; false when there is none.
        @discardableResult
        private mutating func skipDigits() -> Bool {
            let start = offset
            while let byte = current, (0x30...0x39).contains(byte) { offset += 1 }
            return offset > start
        }

        private mutating func string() -> Bool {
            guard take(UInt8(ascii: "\"")) else { return false }
            while offset < bytes.count {
                let byte = bytes[offset]
                offset += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return true
                case UInt8(ascii: "\\"):
                    guard let escaped = current else { return false }
                    offset += 1
                    switch escaped {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                        UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        continue
                    case UInt8(ascii: "u"):
                        for _ in 0..<4 {
                            guard let digit = current, digit.isHexDigit else { return false }
                            offset += 1
                        }
                    default:
                        return false
                    }
                case ..<0x20:
                    return false
                default:
                    continue
                }
            }
            return false
        }
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
    }
}
