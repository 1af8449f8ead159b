import Foundation
import ReactorCore
import ReactorExamples
import TestSupport
import Testing

@testable import SortedJSON

/// The state encoder writes the bytes Foundation's `JSONEncoder` writes with sorted keys, so
/// that states, ETags and the examples clients see do not depend on which of the two ran.
@Suite struct SortedJSONEncoderTests {
    private static let foundation: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// Checks both ways of encoding against Foundation, and that values whose containers are used
    /// in nesting order (`streams`) take the fast one.
    private func expectSameBytes<Value: Encodable>(
        _ value: Value,
        streams: Bool = true,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let expected = String(decoding: try Self.foundation.encode(value), as: UTF8.self)
        let encoded = String(decoding: try SortedJSONEncoder.encode(value), as: UTF8.self)
        #expect(encoded == expected, sourceLocation: sourceLocation)
        let throughTree = String(decoding: try SortedJSONEncoder.encodeThroughTree(value), as: UTF8.self)
        #expect(throughTree == expected, "through the tree", sourceLocation: sourceLocation)
        let streamed = try JSONStreamEncoder.encode(value)
        #expect((streamed != nil) == streams, "streamed", sourceLocation: sourceLocation)
    }

    @Test func examplesStatesAndActions() throws {
        var counter = CounterReactor.State(value: -3, isLoading: true)
        try expectSameBytes(counter)
        counter.alertMessage = "increased!"
        try expectSameBytes(counter)
        try expectSameBytes(CounterReactor.Action.increase)
        try expectSameBytes(
            TodoReactor.State(tasks: [
                TodoTask(id: "t1", title: "buy \"milk\"/bread\n", isDone: true),
                TodoTask(id: "t2", title: "émile 😀"),
            ]))
        var search = SearchReactor.State()
        search.query = "swift"
        search.results = ["swift-log", "swift-nio"]
        search.nextPage = 2
        try expectSameBytes(search)
        let room = try JSONDecoder().decode(
            RoomReactor.State.self,
            from: Data(
                """
                {"name":"ada","messages":[{"id":1,"author":"ada","text":"hi\\u0001"}],"members":[{"id":7,"name":"bo"}]}
                """.utf8))
        try expectSameBytes(room)
        for action in TodoReactor.exampleActions { try expectSameBytes(action) }
        for action in RoomReactor.exampleActions { try expectSameBytes(action) }
        for action in SearchReactor.exampleActions { try expectSameBytes(action) }
    }

    @Test func numbersAtTheirLimits() throws {
        try expectSameBytes(
            Numbers(
                int: .min, int8: .min, int16: .min, int32: .min, int64: .min,
                uint: .max, uint8: .max, uint16: .max, uint32: .max, uint64: .max,
                doubles: [0, -0.0, 1, -1.5, 0.1, 1e20, 1e-7, 1.2345678901234568e20, .pi, .greatestFiniteMagnitude, .leastNonzeroMagnitude],
                floats: [0, 1, 3.25, .pi, .greatestFiniteMagnitude, 1e-30]
            ))
        try expectSameBytes([Int128.min, Int128.max])
        try expectSameBytes([UInt128.max])
        try expectSameBytes(WideIntegersInAnUnkeyedContainer())
    }

    @Test func everyControlCharacterQuoteBackslashAndSlash() throws {
        let text = String(decoding: (0..<0x20).map { UInt8($0) }, as: UTF8.self) + "\"\\/ é 😀 \u{7F}"
        try expectSameBytes([text: text])
    }

    @Test func foundationTypesInTheFormsFoundationWrites() throws {
        try expectSameBytes(
            FoundationValues(
                data: Data([0, 1, 2, 250, 255]),
                date: Date(timeIntervalSinceReferenceDate: 12345.5),
                url: URL(string: "https://example.com/a/b?c=d#e")!,
                relativeURL: URL(string: "b/c", relativeTo: URL(string: "https://example.com/a/")!)!,
                decimal: Decimal(string: "-12.5000")!,
                optionalData: Data("hi".utf8)
            ))
        try expectSameBytes(Data())
        try expectSameBytes(URL(string: "file:///tmp/x")!)
    }

    @Test func collectionsOptionalsAndEnums() throws {
        try expectSameBytes(["b": 1, "a": 2, "B": 3, "é": 4, "": 5, "aa": 6, "_": 7])
        try expectSameBytes([3: "c", 1: "a", 20: "t"])
        try expectSameBytes([1.5: "x"])
        try expectSameBytes([[Int?]]([[1, nil], [], [nil]]))
        try expectSameBytes(Optional<Int>.none)
        try expectSameBytes(Optional<String>.some("x"))
        try expectSameBytes([Shape.circle(radius: 2), .square(3), .none, .named(first: "a", "b")])
        try expectSameBytes([Empty()])
        #expect(throws: EncodingError.self) { try SortedJSONEncoder.encode(Empty()) }
        #expect(throws: EncodingError.self) { try Self.foundation.encode(Empty()) }
        try expectSameBytes("top-level string")
        try expectSameBytes(42)
    }

    @Test func containersUsedInAnyOrder() throws {
        try expectSameBytes(HandWritten(), streams: false)
        // Foundation traps on a second single value; the tree encoder keeps the last.
        #expect(try JSONStreamEncoder.encode([OutOfOrder.twoSingleValues]) == nil)
        #expect(try SortedJSONEncoder.encode([OutOfOrder.twoSingleValues]) == Array(#"["two"]"#.utf8))
        try expectSameBytes(["k": OutOfOrder.writesToItsParent], streams: false)
        try expectSameBytes(OutOfOrder.nestedTwice, streams: false)
    }

    @Test func nestedContainersUsedInNestingOrderAreStreamed() throws {
        try expectSameBytes(InOrder())
    }

    /// The bytes are kept with their state for as long as its instance holds it. (Up to 48 bytes
    /// more than asked is glibc's doing: it rounds a request up to 16 bytes and hands out a whole
    /// free chunk when what would be left of it is below its 32-byte minimum.)
    @Test func encodedBytesKeepNoSpareRoom() throws {
        let counter = try SortedJSONEncoder.encode(CounterReactor.State())
        #expect(counter.capacity <= counter.count + 48)
        let handWritten = try SortedJSONEncoder.encode(HandWritten())
        #expect(handWritten.capacity <= handWritten.count + 48)
    }

    @Test func nonFiniteNumbersAndTooDeepNestingAreRefused() throws {
        #expect(throws: EncodingError.self) { try SortedJSONEncoder.encode([Double.nan]) }
        #expect(throws: EncodingError.self) { try SortedJSONEncoder.encode(["x": Float.infinity]) }
        #expect(throws: EncodingError.self) { try SortedJSONEncoder.encode(-Double.infinity) }
        // Foundation refuses 512 levels of nesting and takes 511.
        #expect(throws: (any Error).self) { try Self.foundation.encode(Nested(depth: 512)) }
        #expect(throws: EncodingError.self) { try SortedJSONEncoder.encode(Nested(depth: 512)) }
        #expect(throws: EncodingError.self) { try SortedJSONEncoder.encodeThroughTree(Nested(depth: 512)) }
        try expectSameBytes(Nested(depth: 511))
    }

    /// Random values of every shape, compared byte for byte; the seed is in the failure.
    @Test(arguments: 0..<4)
    func randomValuesGiveFoundationsBytes(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        for _ in 0..<500 {
            let value = RandomValue.make(depth: 0, random: &random)
            try expectSameBytes(value)
        }
    }
}

// MARK: - Values

/// Calls the unkeyed container's own 128-bit `encode` methods (an array of them goes through each
/// element's single value container instead).
private struct WideIntegersInAnUnkeyedContainer: Encodable {
    func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(Int128.min)
        try container.encode(UInt128.max)
    }
}

private struct Numbers: Encodable {
    let int: Int, int8: Int8, int16: Int16, int32: Int32, int64: Int64
    let uint: UInt, uint8: UInt8, uint16: UInt16, uint32: UInt32, uint64: UInt64
    let doubles: [Double]
    let floats: [Float]
}

private struct FoundationValues: Encodable {
    let data: Data, date: Date, url: URL, relativeURL: URL, decimal: Decimal
    let optionalData: Data?
}

private enum Shape: Encodable {
    case circle(radius: Double)
    case square(Int)
    case none
    case named(first: String, String)
}

private struct Empty: Encodable {
    func encode(to encoder: any Encoder) throws {}
}

/// Deeply nested arrays.
private struct Nested: Encodable {
    let depth: Int
    func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        if depth > 1 { try container.encode(Nested(depth: depth - 1)) }
    }
}

/// An `encode(to:)` that uses nested containers and super encoders, writing to a container after
/// a later sibling was written, and a key twice.
private struct HandWritten: Encodable {
    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        var root = encoder.container(keyedBy: Key.self)
        var inner = root.nestedContainer(keyedBy: Key.self, forKey: Key("z-inner"))
        var list = root.nestedUnkeyedContainer(forKey: Key("list"))
        try root.encode(1, forKey: Key("twice"))
        try inner.encode("late", forKey: Key("b"))
        try list.encode(true)
        var listInner = list.nestedContainer(keyedBy: Key.self)
        try list.encodeNil()
        try listInner.encode(2.5, forKey: Key("x"))
        var deeper = list.nestedUnkeyedContainer()
        try deeper.encode("d")
        let superEncoder = root.superEncoder()
        let keyedSuper = root.superEncoder(forKey: Key("parent"))
        let listSuper = list.superEncoder()
        try root.encode(2, forKey: Key("twice"))
        try inner.encode("early", forKey: Key("a"))
        var superContainer = superEncoder.container(keyedBy: Key.self)
        try superContainer.encode("s", forKey: Key("from-super"))
        var keyedSuperValue = keyedSuper.singleValueContainer()
        try keyedSuperValue.encode([1, 2])
        var listSuperValue = listSuper.singleValueContainer()
        try listSuperValue.encode("last")
        _ = root.superEncoder(forKey: Key("nothing"))
    }
}

/// Nested containers each finished before the next write to their parent (left open, never
/// used again), and the same keyed container asked for twice.
private struct InOrder: Encodable {
    private enum Key: String, CodingKey {
        case b, a, c, list
        case zero = "0"
        case x, y, z
    }

    func encode(to encoder: any Encoder) throws {
        var root = encoder.container(keyedBy: Key.self)
        try root.encode("b", forKey: .b)
        var nested = root.nestedContainer(keyedBy: Key.self, forKey: .a)
        try nested.encode(2, forKey: .y)
        try nested.encode(1, forKey: .x)
        try root.encode(true, forKey: .c)
        var list = root.nestedUnkeyedContainer(forKey: .list)
        try list.encode(1)
        var element = list.nestedContainer(keyedBy: Key.self)
        try element.encode([3, 4], forKey: .z)
        try element.encodeNil(forKey: .x)
        var again = encoder.container(keyedBy: Key.self)
        try again.encode(0.5, forKey: .zero)
    }
}

/// Uses of containers the streaming encoder leaves to the tree encoder.
private enum OutOfOrder: Encodable {
    /// One value given two single values.
    case twoSingleValues
    /// A nested value's `encode(to:)` writing to its parent's container while it encodes.
    case writesToItsParent
    /// Nested containers asked for twice under the same key: the second continues the first.
    case nestedTwice

    private enum Key: String, CodingKey { case first, second, late, list }

    /// Writes to `parent` from inside its own `encode(to:)`.
    private struct Meddler: Encodable {
        let parent: KeyedEncodingContainer<Key>
        func encode(to encoder: any Encoder) throws {
            var parent = parent
            try parent.encode("from the child", forKey: .late)
            var own = encoder.container(keyedBy: Key.self)
            try own.encode(1, forKey: .first)
        }
    }

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .twoSingleValues:
            var container = encoder.singleValueContainer()
            try container.encode(1)
            try container.encode("two")
        case .writesToItsParent:
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(Meddler(parent: container), forKey: .second)
        case .nestedTwice:
            var container = encoder.container(keyedBy: Key.self)
            var nested = container.nestedContainer(keyedBy: Key.self, forKey: .first)
            try nested.encode(1, forKey: .second)
            var list = container.nestedUnkeyedContainer(forKey: .list)
            try list.encode("a")
            try container.encode(true, forKey: .late)
            var again = container.nestedContainer(keyedBy: Key.self, forKey: .first)
            try again.encode(2, forKey: .late)
            var listAgain = container.nestedUnkeyedContainer(forKey: .list)
            try listAgain.encode("b")
        }
    }
}

/// A random JSON-shaped value, encoded through every kind of container.
private indirect enum RandomValue: Encodable {
    case null
    case bool(Bool)
    case int(Int64)
    case unsigned(UInt64)
    case double(Double)
    case float(Float)
    case string(String)
    case optional(RandomValue?)
    case array([RandomValue])
    case object([(String, RandomValue)])
    case dictionary([String: RandomValue])
    case intKeyed([Int: RandomValue])
    case data(Data)
    case decimal(Decimal)
    case url(URL)

    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let value): try value.encode(to: encoder)
        case .int(let value): try value.encode(to: encoder)
        case .unsigned(let value): try value.encode(to: encoder)
        case .double(let value): try value.encode(to: encoder)
        case .float(let value): try value.encode(to: encoder)
        case .string(let value): try value.encode(to: encoder)
        case .optional(let value): try value.encode(to: encoder)
        case .array(let elements):
            var container = encoder.unkeyedContainer()
            for element in elements { try container.encode(element) }
        case .object(let fields):
            var container = encoder.container(keyedBy: Key.self)
            for (key, value) in fields {
                let key = Key(stringValue: key)!
                switch value {
                case .bool(let bool): try container.encode(bool, forKey: key)
                case .string(let string): try container.encode(string, forKey: key)
                case .double(let double): try container.encode(double, forKey: key)
                case .null: try container.encodeNil(forKey: key)
                default: try container.encode(value, forKey: key)
                }
            }
        case .dictionary(let dictionary): try dictionary.encode(to: encoder)
        case .intKeyed(let dictionary): try dictionary.encode(to: encoder)
        case .data(let data):
            var container = encoder.singleValueContainer()
            try container.encode(data)
        case .decimal(let decimal):
            var container = encoder.singleValueContainer()
            try container.encode(decimal)
        case .url(let url):
            var container = encoder.singleValueContainer()
            try container.encode(url)
        }
    }

    /// Keys meant to collide and to sort differently by bytes than by case or accent.
    private static let keys = ["a", "A", "b", "B", "aa", "", "é", "z", "_", "0", "\"", "k\n", "😀", "\u{7F}"]
    private static let strings = ["", "x", "a\"b", "back\\slash", "/", "\u{0}", "\u{1F}", "\t\r\n\u{8}\u{C}", "é", "日本", "😀"]

    static func make(depth: Int, random: inout SplitMix64) -> RandomValue {
        let leafOnly = depth >= 4
        switch random.next(below: leafOnly ? 9 : 15) {
        case 0: return .null
        case 1: return .bool(random.next(below: 2) == 1)
        case 2: return .int(Int64(bitPattern: random.next()) >> Int64(random.next(below: 64)))
        case 3: return .unsigned(random.next() >> UInt64(random.next(below: 64)))
        case 4:
            let double = Double(bitPattern: random.next())
            return .double(double.isFinite ? double : Double(Int64(bitPattern: random.next()) >> 20) / 1024)
        case 5:
            let float = Float(bitPattern: UInt32(truncatingIfNeeded: random.next()))
            return .float(float.isFinite ? float : 0.5)
        case 6:
            return .string((0..<random.next(below: 4)).map { _ in strings[random.next(below: strings.count)] }.joined())
        case 7: return .data(Data((0..<random.next(below: 7)).map { _ in UInt8(truncatingIfNeeded: random.next()) }))
        case 8:
            let decimal = Decimal(Int(truncatingIfNeeded: random.next() >> 40)) / Decimal(1 << random.next(below: 8))
            return .decimal(decimal)
        case 9: return .optional(random.next(below: 2) == 0 ? nil : make(depth: depth + 1, random: &random))
        case 10: return .array((0..<random.next(below: 5)).map { _ in make(depth: depth + 1, random: &random) })
        case 11:
            return .object(
                (0..<random.next(below: 6)).map { _ in
                    (keys[random.next(below: keys.count)], make(depth: depth + 1, random: &random))
                })
        case 12:
            var dictionary: [String: RandomValue] = [:]
            for _ in 0..<random.next(below: 5) {
                dictionary[keys[random.next(below: keys.count)]] = make(depth: depth + 1, random: &random)
            }
            return .dictionary(dictionary)
        case 13:
            var dictionary: [Int: RandomValue] = [:]
            for _ in 0..<random.next(below: 4) { dictionary[random.next(below: 30) - 10] = make(depth: depth + 1, random: &random) }
            return .intKeyed(dictionary)
        default:
            return .url(URL(string: "https://example.com/\(random.next(below: 100))?q=\(random.next(below: 9))")!)
        }
    }
}
