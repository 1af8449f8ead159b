/// Writes a flat JSON object field by field, in the order given, splicing already-encoded
/// JSON where a value is known as bytes (a state encoded once and shared).
public struct JSONObjectWriter {
    private var bytes: [UInt8] = [UInt8(ascii: "{")]
    private var isEmpty = true

    public init(capacity: Int = 128) {
        bytes.reserveCapacity(capacity)
    }

    /// Adds a field whose value is a string, escaped.
    public mutating func add(_ key: String, string value: String) {
        addKey(key)
        JSONText.appendString(value, to: &bytes)
    }

    /// Adds a field whose value is raw JSON text (a number, `true`, an encoded object).
    public mutating func add(_ key: String, raw value: String) {
        addKey(key)
        bytes.append(contentsOf: value.utf8)
    }

    /// Adds a field whose value is already-encoded JSON bytes.
    public mutating func add(_ key: String, json value: [UInt8]) {
        addKey(key)
        bytes.append(contentsOf: value)
    }

    /// Closes the object and returns its bytes.
    public mutating func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    private mutating func addKey(_ key: String) {
        if !isEmpty { bytes.append(UInt8(ascii: ",")) }
        isEmpty = false
        JSONText.appendString(key, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }
}
