import Foundation
import SortedJSON
import TestSupport
import Testing

/// `JSONPatch.diff` checked by applying its patches with an RFC 6902 implementation of the
/// test's own (over Foundation's JSON values), on fixed cases and random documents.
@Suite struct JSONPatchTests {
    private func canonical(_ value: Any) throws -> [UInt8] {
        Array(try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes]))
    }

    /// Checks that the patch from `old` to `new` turns `old` into `new`; returns its operations.
    @discardableResult
    private func check(_ old: Any, _ new: Any) throws -> [[String: Any]] {
        let (before, after) = (try canonical(old), try canonical(new))
        let patch = try #require(JSONPatch.diff(from: before, to: after))
        let operations = try #require(try JSONSerialization.jsonObject(with: Data(patch)) as? [[String: Any]])
        let applied = try RFC6902.apply(operations, to: try JSONSerialization.jsonObject(with: Data(before), options: .fragmentsAllowed))
        #expect(try canonical(applied) == after, "patch \(String(decoding: patch, as: UTF8.self))")
        return operations
    }

    @Test func equalDocumentsNeedNoOperation() throws {
        #expect(try check(["a": [1, 2, ["b": true]]], ["a": [1, 2, ["b": true]]]).isEmpty)
    }

    @Test func objectsGainLoseAndChangeKeys() throws {
        let operations = try check(
            ["keep": 1, "drop": 2, "change": ["deep": "x"]],
            ["keep": 1, "add": [3], "change": ["deep": "y"]])
        #expect(operations.count == 3)
        #expect(operations.contains { $0["op"] as? String == "replace" && $0["path"] as? String == "/change/deep" })
    }

    @Test func keysThatNeedEscapingAndUnicodeKeys() throws {
        let operations = try check(
            ["a/b": 1, "m~n": ["~/": 2], "ключ ✓": "x", "é\u{1F600}": [1]],
            ["a/b": 2, "m~n": ["~/": 3], "ключ ✓": "y", "é\u{1F600}": [1, 2]])
        let paths = Set(operations.compactMap { $0["path"] as? String })
        #expect(paths == ["/a~1b", "/m~0n/~0~1", "/ключ ✓", "/é\u{1F600}/1"])
    }

    @Test func arraysByPositionNestedAndOfMixedKinds() throws {
        try check([[1, 2], [3, [4, 5]], "x"], [[1], [3, [4, 6, 7]], "x", ["y"]])
        try check([1, 2, 3], [])
        try check([], [["id": 1]])
        try check(["list": [1, "two", nil, 4.5] as [Any?]], ["list": [1, "three"]])
        try check(["a": 1], [1])
        try check("text", ["now": "an object"])
    }

    @Test func keyedElementsAreMatchedByID() throws {
        let tasks = (0..<100).map { ["id": "t\($0)", "isDone": false, "title": "task \($0)"] as [String: Any] }
        var toggled = tasks
        toggled[42]["isDone"] = true
        let operations = try check(["tasks": tasks], ["tasks": toggled])
        #expect(operations.count == 1)
        #expect(operations.first?["path"] as? String == "/tasks/42/isDone")

        var edited = tasks
        edited.remove(at: 10)
        edited.insert(["id": "new", "isDone": false, "title": "new"], at: 50)
        edited.swapAt(0, 98)
        edited[70]["title"] = "renamed"
        let changes = try check(["tasks": tasks], ["tasks": edited])
        #expect(changes.count < 10, "\(changes)")
    }

    @Test func randomDocumentsPatchIntoEachOther() throws {
        var random = SplitMix64(seed: 0x5EED)
        for _ in 0..<2_000 {
            let old = randomValue(&random, depth: 0)
            let new = random.next(below: 3) == 0 ? randomValue(&random, depth: 0) : mutate(old, &random)
            try check(old, new)
        }
    }

    @Test func notJSONIsRefused() {
        #expect(JSONPatch.diff(from: Array("{".utf8), to: Array("{}".utf8)) == nil)
        #expect(JSONPatch.diff(from: Array("[1] x".utf8), to: Array("[1]".utf8)) == nil)
        #expect(JSONPatch.diff(from: Array(#"{"a":tru}"#.utf8), to: Array("{}".utf8)) == nil)
    }

    // MARK: Random documents

    private let keys = ["id", "a", "b/c", "d~e", "ü", "✓", "~1", "x y", ""]

    private func randomValue(_ random: inout SplitMix64, depth: Int) -> Any {
        switch random.next(below: depth > 3 ? 3 : 6) {
        case 0: return random.next(below: 100)
        case 1: return ["s", "ß", "\"q\"", "a\\b", "✓"][random.next(below: 5)]
        case 2: return random.next(below: 2) == 0
        case 3:
            var object: [String: Any] = [:]
            for _ in 0..<random.next(below: 4) { object[keys[random.next(below: keys.count)]] = randomValue(&random, depth: depth + 1) }
            return object
        case 4:
            // Sometimes a list of objects with distinct ids (matched by id), sometimes not.
            if random.next(below: 2) == 0 {
                return (0..<random.next(below: 6)).map { ["id": "k\($0)", "v": randomValue(&random, depth: depth + 1)] as [String: Any] }
            }
            return (0..<random.next(below: 4)).map { _ in randomValue(&random, depth: depth + 1) }
        default: return NSNull()
        }
    }

    private func mutate(_ value: Any, _ random: inout SplitMix64) -> Any {
        if var object = value as? [String: Any] {
            switch random.next(below: 3) {
            case 0: object[keys[random.next(below: keys.count)]] = randomValue(&random, depth: 2)
            case 1: if let key = object.keys.sorted().first { object[key] = nil }
            default:
                for key in object.keys.sorted() where random.next(below: 2) == 0 { object[key] = mutate(object[key]!, &random) }
            }
            return object
        }
        if var array = value as? [Any] {
            switch random.next(below: 4) {
            case 0 where !array.isEmpty: array.remove(at: random.next(below: array.count))
            case 1 where array.count > 1:
                array.swapAt(random.next(below: array.count), random.next(below: array.count))
                if random.next(below: 2) == 0 { array.reverse() }
            case 2:
                let element: Any =
                    array.first is [String: Any]
                    ? ["id": "n\(random.next(below: 1000))", "v": 1] as [String: Any] : randomValue(&random, depth: 2)
                array.insert(element, at: random.next(below: array.count + 1))
            default:
                if !array.isEmpty {
                    let index = random.next(below: array.count)
                    array[index] = mutate(array[index], &random)
                }
            }
            return array
        }
        return randomValue(&random, depth: 2)
    }
}

/// RFC 6902's add, remove, replace and move over Foundation's JSON values, written for the tests
/// from the RFC alone.
private enum RFC6902 {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func apply(_ operations: [[String: Any]], to document: Any) throws -> Any {
        var document = document
        for operation in operations {
            guard let op = operation["op"] as? String, let path = operation["path"] as? String else {
                throw Failure(description: "malformed operation \(operation)")
            }
            switch op {
            case "add": document = try add(operation["value"] as Any, at: tokens(path), in: document)
            case "remove": document = try remove(at: tokens(path), in: document).document
            case "replace" where path.isEmpty:
                document = operation["value"] as Any
            case "replace":
                document = try add(
                    operation["value"] as Any, at: tokens(path),
                    in: try remove(at: tokens(path), in: document).document)
            case "move":
                guard let from = operation["from"] as? String else { throw Failure(description: "move without from") }
                let (without, moved) = try remove(at: tokens(from), in: document)
                document = try add(moved, at: tokens(path), in: without)
            default: throw Failure(description: "unexpected op \(op)")
            }
        }
        return document
    }

    static func tokens(_ pointer: String) throws -> [String] {
        if pointer.isEmpty { return [] }
        guard pointer.hasPrefix("/") else { throw Failure(description: "bad pointer \(pointer)") }
        return pointer.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map {
            $0.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
        }
    }

    static func add(_ value: Any, at path: [String], in document: Any) throws -> Any {
        guard let token = path.first else { return value }
        let rest = Array(path.dropFirst())
        if var object = document as? [String: Any] {
            object[token] = rest.isEmpty ? value : try add(value, at: rest, in: object[token] as Any)
            return object
        }
        guard var array = document as? [Any] else { throw Failure(description: "no container at \(token)") }
        let index = token == "-" ? array.count : Int(token) ?? -1
        if rest.isEmpty {
            guard (0...array.count).contains(index) else { throw Failure(description: "add index \(token) of \(array.count)") }
            array.insert(value, at: index)
        } else {
            guard array.indices.contains(index) else { throw Failure(description: "index \(token)") }
            array[index] = try add(value, at: rest, in: array[index])
        }
        return array
    }

    static func remove(at path: [String], in document: Any) throws -> (document: Any, removed: Any) {
        guard let token = path.first else { throw Failure(description: "cannot remove the root") }
        let rest = Array(path.dropFirst())
        if var object = document as? [String: Any] {
            guard let child = object[token] else { throw Failure(description: "no key \(token)") }
            if rest.isEmpty {
                object[token] = nil
                return (object, child)
            }
            let (changed, removed) = try remove(at: rest, in: child)
            object[token] = changed
            return (object, removed)
        }
        guard var array = document as? [Any], let index = Int(token), array.indices.contains(index) else {
            throw Failure(description: "no element \(token)")
        }
        if rest.isEmpty {
            let removed = array.remove(at: index)
            return (array, removed)
        }
        let (changed, removed) = try remove(at: rest, in: array[index])
        array[index] = changed
        return (array, removed)
    }
}
