/// A value whose every assignment is an event, even of an equal value.
///
/// Each assignment increments ``valueUpdatedCount`` (wrapping on overflow), so a subscriber can
/// tell "the same alert shown again" from "nothing happened". It encodes to JSON as
/// `{"value": …, "count": n}` for the same reason.
///
/// ```swift
/// struct State: Codable, Sendable {
///     @Pulse var alertMessage: String?
/// }
/// state.alertMessage = "increased!"      // count 1
/// state.alertMessage = "increased!"      // count 2
/// state.$alertMessage.valueUpdatedCount  // 2
/// ```
@propertyWrapper
public struct Pulse<Value> {
    @usableFromInline var storedValue: Value
    @usableFromInline var storedCount: UInt

    /// The last assigned value.
    @inlinable public var value: Value { storedValue }
    /// How many times a value was assigned since creation (wraps on overflow).
    @inlinable public var valueUpdatedCount: UInt { storedCount }

    /// Starts with `wrappedValue` and a count of 0.
    @inlinable public init(wrappedValue: Value) {
        self.storedValue = wrappedValue
        self.storedCount = 0
    }

    /// Restores a pulse with a given count (decoding, tests).
    @inlinable public init(value: Value, valueUpdatedCount: UInt) {
        self.storedValue = value
        self.storedCount = valueUpdatedCount
    }

    /// The value; every assignment increments ``valueUpdatedCount``.
    @inlinable public var wrappedValue: Value {
        get { storedValue }
        set {
            storedValue = newValue
            storedCount &+= 1
        }
    }

    /// The pulse itself (`$alertMessage`): the value and its count.
    @inlinable public var projectedValue: Pulse<Value> { self }
}

extension Pulse: Sendable where Value: Sendable {}
extension Pulse: Equatable where Value: Equatable {}
extension Pulse: Hashable where Value: Hashable {}

/// A pulse's keys. Outside the generic type: nested in it, every encode of a pulse looked up the
/// metadata of `KeyedEncodingContainer<Pulse<Value>.CodingKeys>` at run time (about 8 % of
/// encoding a counter's state).
private enum PulseCodingKeys: String, CodingKey {
    case value
    case count
}

extension Pulse: Codable where Value: Codable {
    /// Decodes `{"value": …, "count": n}`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: PulseCodingKeys.self)
        self.init(
            value: try container.decode(Value.self, forKey: .value),
            valueUpdatedCount: try container.decode(UInt.self, forKey: .count)
        )
    }

    /// Encodes `{"value": …, "count": n}`; a `nil` value is written as `null`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: PulseCodingKeys.self)
        try container.encode(value, forKey: .value)
        try container.encode(valueUpdatedCount, forKey: .count)
    }
}
