import Foundation

/// Decodes the JSON of a reactor's `Action`: its synthesized Codable form
/// (`{"add":{"title":"milk"}}`), or a bare JSON string naming a case without payload
/// (`"increase"`, read as `{"increase":{}}`).
enum ActionDecoding {
    static func decode<Action: Decodable>(_ type: Action.Type, from body: [UInt8]) throws(Problem) -> Action {
        guard body.contains(where: { !isJSONWhitespace($0) }) else {
            throw Problem.invalidAction("the body is empty: send the JSON of an action, for example \"increase\"")
        }
        let firstError: Problem
        do {
            return try JSONCoding.decode(type, from: body)
        } catch {
            firstError = error
        }
        if let caseName = try? JSONCoding.decoder.decode(String.self, from: Data(body)) {
            var wrapped = JSONObjectWriter()
            wrapped.add(caseName, raw: "{}")
            if let action = try? JSONCoding.decoder.decode(type, from: Data(wrapped.finish())) {
                return action
            }
            throw Problem.invalidAction("unknown action '\(caseName)'")
        }
        throw Problem.invalidAction(firstError.detail)
    }

    private static func isJSONWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }
}
