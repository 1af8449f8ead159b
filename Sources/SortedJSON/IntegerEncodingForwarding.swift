// The encoding containers' twelve integer requirements, each forwarded to one generic method, so
// that a container writing every integer the same way says so once.

/// A keyed container that encodes every fixed-width integer through `encodeInteger`.
protocol KeyedIntegerForwarding: KeyedEncodingContainerProtocol {
    mutating func encodeInteger(_ value: some FixedWidthInteger, forKey key: Key) throws
}

extension KeyedIntegerForwarding {
    mutating func encode(_ value: Int, forKey key: Key) throws { try encodeInteger(value, forKey: key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try encodeInteger(value, forKey: key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try encodeInteger(value, forKey: key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try encodeInteger(value, forKey: key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try encodeInteger(value, forKey: key) }
    mutating func encode(_ value: Int128, forKey key: Key) throws { try encodeInteger(value, forKey: key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try encodeInteger(value, forKey: key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try encodeInteger(value, forKey: key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try encodeInteger(value, forKey: key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try encodeInteger(value, forKey: key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try encodeInteger(value, forKey: key) }
    mutating func encode(_ value: UInt128, forKey key: Key) throws { try encodeInteger(value, forKey: key) }
}

/// An unkeyed or single value container that encodes every fixed-width integer through
/// `encodeInteger`. The two container protocols ask for the same `encode(_:)` methods, so one set
/// of forwarders serves both: a type conforming to either and to this protocol takes these as its
/// witnesses.
protocol IntegerForwarding {
    mutating func encodeInteger(_ value: some FixedWidthInteger) throws
}

extension IntegerForwarding {
    mutating func encode(_ value: Int) throws { try encodeInteger(value) }
    mutating func encode(_ value: Int8) throws { try encodeInteger(value) }
    mutating func encode(_ value: Int16) throws { try encodeInteger(value) }
    mutating func encode(_ value: Int32) throws { try encodeInteger(value) }
    mutating func encode(_ value: Int64) throws { try encodeInteger(value) }
    mutating func encode(_ value: UInt) throws { try encodeInteger(value) }
    mutating func encode(_ value: UInt8) throws { try encodeInteger(value) }
    mutating func encode(_ value: UInt16) throws { try encodeInteger(value) }
    mutating func encode(_ value: UInt32) throws { try encodeInteger(value) }
    mutating func encode(_ value: UInt64) throws { try encodeInteger(value) }
}

// The 128-bit requirements came later and have default implementations (which refuse the value)
// in each container protocol's own extension; a forwarder from an unrelated protocol would tie
// with those, so these two are given where they are more specific than the defaults.

extension UnkeyedEncodingContainer where Self: IntegerForwarding {
    mutating func encode(_ value: Int128) throws { try encodeInteger(value) }
    mutating func encode(_ value: UInt128) throws { try encodeInteger(value) }
}

extension SingleValueEncodingContainer where Self: IntegerForwarding {
    mutating func encode(_ value: Int128) throws { try encodeInteger(value) }
    mutating func encode(_ value: UInt128) throws { try encodeInteger(value) }
}
