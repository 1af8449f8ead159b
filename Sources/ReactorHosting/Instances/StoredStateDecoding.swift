import Foundation

/// Decodes a stored state as its reactor type's `State` of today.
///
/// A state stored by an earlier build of the reactor may lack properties its type has gained
/// since (a new `var step = 1` that Swift's synthesized `Decodable` still requires). Each key
/// the decoder misses is taken from the type's initial state, at the same place, and decoding
/// is tried again. Anything else (a renamed key, a changed type, a missing key the initial state
/// has no place for) still fails. The stored bytes are never changed here.
enum StoredStateDecoding {
    /// The decoded state, and the keys filled from the initial state as paths
    /// (`alertMessage.count`): empty when the stored state decoded as it was.
    struct Decoded<State> {
        let state: State
        let filledKeys: [String]
    }

    /// More missing keys than this and the stored state is taken as not this type's.
    static let fillLimit = 256

    /// Decodes `stored` as `State`, filling missing keys from `initialState` (both sorted-key
    /// JSON); throws ``HostingError/storedSessionIncompatible(_:)`` naming what still fails.
    static func decode<State: Decodable>(
        _ type: State.Type, stored: [UInt8],
        initialState: [UInt8]
    ) throws(HostingError) -> Decoded<State> {
        let firstError: DecodingError
        do {
            return Decoded(state: try JSONCoding.decoder.decode(type, from: Data(stored)), filledKeys: [])
        } catch let error as DecodingError {
            firstError = error
        } catch {
            throw .storedSessionIncompatible("the stored state does not decode: \(error)")
        }
        guard case .keyNotFound = firstError,
            var tree = try? JSONCoding.decoder.decode(JSONValue.self, from: Data(stored)),
            let initialTree = try? JSONCoding.decoder.decode(JSONValue.self, from: Data(initialState))
        else { throw incompatible(firstError) }
        var filled: [String] = []
        var error = firstError
        while case .keyNotFound(let key, let context) = error, filled.count < fillLimit {
            let path = context.codingPath.map(JSONValue.PathStep.init)
            guard let filler = initialTree.value(at: path + [.key(key.stringValue)]),
                tree.insert(filler, forKey: key.stringValue, at: path[...])
            else { break }
            filled.append((path + [.key(key.stringValue)]).map(\.description).joined(separator: "."))
            do {
                let bytes = try JSONEncoder().encode(tree)
                return Decoded(state: try JSONCoding.decoder.decode(type, from: bytes), filledKeys: filled)
            } catch let next as DecodingError {
                error = next
            } catch {
                break
            }
        }
        throw incompatible(error)
    }

    private static func incompatible(_ error: DecodingError) -> HostingError {
        .storedSessionIncompatible("the stored state does not decode as the type's State: \(JSONCoding.describe(error))")
    }
}

/// Any JSON value, decoded and encoded by Foundation's coders: what a stored state is edited as
/// when keys are filled in.
package enum JSONValue: Codable, Equatable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case unsigned(UInt64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// One step into a value: a key into an object, or an index into an array.
    enum PathStep: CustomStringConvertible {
        case key(String)
        case index(Int)

        init(_ key: any CodingKey) {
            self = key.intValue.map(PathStep.index) ?? .key(key.stringValue)
        }

        /// The key this step names in an object: an index spells its digits (a dictionary keyed
        /// by integers encodes as an object).
        var memberName: String {
            switch self {
            case .key(let key): return key
            case .index(let index): return String(index)
            }
        }

        var description: String {
            switch self {
            case .key(let key): return key
            case .index(let index): return "[\(index)]"
            }
        }
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(UInt64.self) {
            self = .unsigned(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .unsigned(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The value at `path`, or nil when the path leaves the value.
    func value(at path: [PathStep]) -> JSONValue? {
        var current = self
        for step in path {
            switch (current, step) {
            case (.object(let members), _):
                guard let next = members[step.memberName] else { return nil }
                current = next
            case (.array(let elements), .index(let index)):
                guard elements.indices.contains(index) else { return nil }
                current = elements[index]
            default: return nil
            }
        }
        return current
    }

    /// Sets `key` to `value` in the object at `path`; false (and nothing changed) when the path
    /// does not lead to an object.
    mutating func insert(_ value: JSONValue, forKey key: String, at path: ArraySlice<PathStep>) -> Bool {
        guard let step = path.first else {
            guard case .object(var members) = self else { return false }
            members[key] = value
            self = .object(members)
            return true
        }
        switch (self, step) {
        case (.object(var members), _):
            let name = step.memberName
            guard var child = members[name], child.insert(value, forKey: key, at: path.dropFirst()) else { return false }
            members[name] = child
            self = .object(members)
            return true
        case (.array(var elements), .index(let index)) where elements.indices.contains(index):
            guard elements[index].insert(value, forKey: key, at: path.dropFirst()) else { return false }
            self = .array(elements)
            return true
        default:
            return false
        }
    }
}
