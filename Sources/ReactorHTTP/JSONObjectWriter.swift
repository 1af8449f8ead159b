/// Writes a flat JSON object field by field, in the order given, splicing already-encoded
/// JSON where a value is known as bytes (a state encoded once and shared).
struct JSONObjectWriter {
    private var bytes: [UInt8] = [UInt8(ascii: "{")]
    private var isEmpty = true

    init(capacity: Int = 128) {
        bytes.reserveCapacity(capacity)
    }

    /// Adds a field whose value is a string, escaped.
    mutating func add(_ key: String, string value: String) {
        addKey(key)
        JSONObjectWriter.appendEscaped(value, to: &bytes)
    }

    /// Adds a field whose value is raw JSON text (a number, `true`, an encoded object).
    mutating func add(_ key: String, raw value: String) {
        addKey(key)
        bytes.append(contentsOf: value.utf8)
    }

    /// Adds a field whose value is already-encoded JSON bytes.
    mutating func add(_ key: String, json value: [UInt8]) {
        addKey(key)
        bytes.append(contentsOf: value)
    }

    /// Closes the object and returns its bytes.
    mutating func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    private mutating func addKey(_ key: String) {
        if !isEmpty { bytes.append(UInt8(ascii: ",")) }
        isEmpty = false
        JSONObjectWriter.appendEscaped(key, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    /// Appends `value` as a JSON string literal.
    static func appendEscaped(_ value: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        // Ids, type names and keys need no escaping: copy them whole.
        if !value.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            bytes.append(contentsOf: value.utf8)
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
