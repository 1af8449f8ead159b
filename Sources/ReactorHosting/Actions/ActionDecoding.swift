import Foundation
import SortedJSON

/// Decodes the JSON of a reactor's `Action`: its synthesized Codable form
/// (`{"add":{"title":"milk"}}`), or a bare JSON string naming a case without payload
/// (`"increase"`, read as `{"increase":{}}`). Failures name what was wrong.
package enum ActionDecoding {
    package static func decode<Action: Decodable>(
        _ type: Action.Type, from body: [UInt8],
        rawValue: RawValueDecoder<Action>
    ) throws(HostingError) -> Action {
        guard body.contains(where: { !isJSONWhitespace($0) }) else {
            throw HostingError.invalidAction("the body is empty: send the JSON of an action, for example \"increase\"")
        }
        guard JSONCoding.isUTF8(body) else {
            throw HostingError.invalidAction("the body is not UTF-8 (JSON must be UTF-8, RFC 8259)")
        }
        // The fast path throws rather than returning an optional when it does not apply: this
        // code runs generic over `Action`, where an `Action?` costs a type lookup per request.
        do { return try rawValue.decode(body) } catch {}
        return try decodeWithFoundation(type, from: body)
    }

    /// Every other body: Foundation's decoder, then the bare-case forms, then an explanation.
    private static func decodeWithFoundation<Action: Decodable>(_ type: Action.Type, from body: [UInt8]) throws(HostingError) -> Action {
        let failure: DecodingError
        do {
            return try JSONCoding.decoder.decode(type, from: Data(body))
        } catch let error as DecodingError {
            failure = error
        } catch {
            throw notJSON(type, body)
        }
        let json = try? JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed])
        if let caseName = json as? String {
            return try decodeBareCase(type, named: caseName)
        }
        // `{"increase":null}`: a case that takes nothing, given a null where its payload goes.
        if let object = json as? [String: Any], object.count == 1, let (caseName, payload) = object.first,
            payload is NSNull, namesCaseWithoutPayload(type, caseName)
        {
            throw HostingError.invalidAction(
                "action '\(caseName)' takes no payload: send \"\(caseName)\" or {\"\(caseName)\":{}}, not null")
        }
        if let object = json as? [String: Any], isTopLevel(failure) {
            guard object.count == 1, let caseName = object.keys.first else {
                throw HostingError.invalidAction(
                    "an action is one case: an object with exactly one key, the case name (got \(object.count) keys)")
            }
            // `{"increase":{}}` for an action whose Codable form is the bare string "increase".
            if let payload = object[caseName] as? [String: Any], payload.isEmpty,
                let action = decodeStringCoded(type, named: caseName)
            {
                return action
            }
            // An unknown case is a type mismatch. A number its field cannot hold (1.5 or 1e20 for
            // an Int) is reported as corrupt data at the top level, without the field's path, as
            // "not valid JSON" though the body parsed; a payload's own init can refuse its data too.
            if case .dataCorrupted(let context) = failure {
                throw HostingError.invalidAction(
                    context.debugDescription.contains("JSON")
                        ? "action '\(caseName)' holds a number its field cannot: a fraction for a whole number, or one out of its range"
                        : "action '\(caseName)': \(context.debugDescription)")
            }
            throw HostingError.invalidAction("unknown action '\(caseName)'")
        }
        if json == nil {
            throw notJSON(type, body)
        }
        throw HostingError.invalidAction(JSONCoding.describe(failure))
    }

    /// The answer to a body that is not JSON; for a bare word naming a case without payload
    /// (`curl -d increase`, the quotes lost to the shell), how to send that case.
    private static func notJSON<Action: Decodable>(_ type: Action.Type, _ body: [UInt8]) -> HostingError {
        let word = String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let isWord =
            word.utf8.count <= 64 && word.utf8.first.map(isWordStart) == true && word.utf8.allSatisfy(isWordByte)
        guard isWord, namesCaseWithoutPayload(type, word) else {
            return HostingError.invalidAction("the body is not valid JSON")
        }
        return HostingError.invalidAction(
            "the body is not valid JSON: send the action '\(word)' as a JSON string, its quotes included (\"\(word)\"; "
                + "with curl, -d '\"\(word)\"')")
    }

    /// Whether `name` is a case of `Action` that takes no payload, in either Codable form: the
    /// string `"name"` (a `String`-coded action) or `{"name":{}}`.
    private static func namesCaseWithoutPayload<Action: Decodable>(_ type: Action.Type, _ name: String) -> Bool {
        decodeStringCoded(type, named: name) != nil || (try? decodeBareCase(type, named: name)) != nil
    }

    /// The case of a `String`-coded action that `name` names, read from the JSON string `"name"`.
    private static func decodeStringCoded<Action: Decodable>(_ type: Action.Type, named name: String) -> Action? {
        var quoted: [UInt8] = []
        JSONText.appendString(name, to: &quoted)
        return try? JSONCoding.decoder.decode(type, from: Data(quoted))
    }

    private static func isWordStart(_ byte: UInt8) -> Bool {
        (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x5F
    }

    private static func isWordByte(_ byte: UInt8) -> Bool {
        isWordStart(byte) || (byte >= 0x30 && byte <= 0x39)
    }

    /// `"name"` read as `{"name":{}}`: a case without payload.
    private static func decodeBareCase<Action: Decodable>(_ type: Action.Type, named caseName: String) throws(HostingError) -> Action {
        var wrapped = JSONObjectWriter()
        wrapped.add(caseName, raw: "{}")
        do {
            return try JSONCoding.decoder.decode(type, from: Data(wrapped.finish()))
        } catch let error as DecodingError where !isTopLevel(error) {
            throw HostingError.invalidAction("action '\(caseName)' needs a payload: \(JSONCoding.describe(error))")
        } catch {
            throw HostingError.invalidAction("unknown action '\(caseName)'")
        }
    }

    private static func isTopLevel(_ error: DecodingError) -> Bool {
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            return context.codingPath.isEmpty
        case .keyNotFound(_, let context):
            return context.codingPath.isEmpty
        @unknown default:
            return true
        }
    }

    private static func isJSONWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }
}

/// The fast path for the most common action body, a plain JSON string such as `"increase"` sent
/// to an action coded by its `String` raw value (what synthesized Codable does for such enums):
/// no Foundation decoder. Whether `Action` has a `String` raw value is looked up once, when the
/// decoder is made, not per request. Strings with escapes take the decoder's path.
///
/// It holds only a metatype: no allocation per instance, and nothing reference-counted to touch
/// per request.
package struct RawValueDecoder<Action>: Sendable {
    private let rawType: (any (RawRepresentable<String> & Sendable).Type)?

    package init(_ type: Action.Type) {
        rawType = type as? any (RawRepresentable<String> & Sendable).Type
    }

    /// The body is not a plain JSON string naming a case of a `String`-coded action: another
    /// way of decoding it applies.
    struct NotARawValue: Error {}

    /// The action a plain JSON string body names.
    func decode(_ body: [UInt8]) throws(NotARawValue) -> Action {
        guard let rawType, body.count >= 2, body.first == UInt8(ascii: "\""), body.last == UInt8(ascii: "\"") else {
            throw NotARawValue()
        }
        let inner = body.dropFirst().dropLast()
        guard !inner.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 < 0x20 }) else {
            throw NotARawValue()
        }
        return try Self.make(rawType, from: String(decoding: inner, as: UTF8.self))
    }

    private static func make<Raw: RawRepresentable<String>>(_ rawType: Raw.Type, from text: String) throws(NotARawValue) -> Action {
        guard let value = Raw(rawValue: text) else { throw NotARawValue() }
        // `Raw` is `Action` itself (`rawType` is `Action.self`, cast in `init`): no dynamic cast
        // per request.
        return unsafeBitCast(value, to: Action.self)
    }
}
