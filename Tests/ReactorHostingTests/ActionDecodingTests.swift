import Testing

@testable import ReactorHosting

/// What a client is told when its action body cannot be read: each answer names what to send.
@Suite struct ActionDecodingTests {
    /// Coded by its raw value: `"increase"`.
    private enum Stepper: String, Codable, Sendable {
        case increase, decrease
    }

    /// Synthesized Codable with and without payloads: `{"reset":{}}`, `{"add":{"title":"milk"}}`.
    private enum List: Codable, Sendable, Equatable {
        case reset
        case add(title: String)
    }

    private func detail<Action: Decodable>(_ type: Action.Type, _ body: String) -> String? {
        do {
            _ = try ActionDecoding.decode(type, from: Array(body.utf8), rawValue: RawValueDecoder(type))
            return nil
        } catch {
            guard case .invalidAction(let detail) = error else { return "\(error)" }
            return detail
        }
    }

    /// `curl -d increase`: the shell took the quotes; the answer says how to keep them.
    @Test(arguments: ["increase", " increase\n"])
    func aBareWordNamingACaseIsAnsweredWithHowToQuoteIt(body: String) {
        let expected =
            #"the body is not valid JSON: send the action 'increase' as a JSON string, its quotes included ("increase"; with curl, -d '"increase"')"#
        #expect(detail(Stepper.self, body) == expected)
        #expect(detail(List.self, "reset")?.contains(#"-d '"reset"'"#) == true)
    }

    /// A word that names no case without payload is only not JSON.
    @Test(arguments: ["jump", "add", "in crease", "increase!", String(repeating: "a", count: 65)])
    func anyOtherBodyThatIsNotJSONIsSaidToBeNotJSON(body: String) {
        #expect(detail(Stepper.self, body) == "the body is not valid JSON")
        #expect(detail(List.self, body) == "the body is not valid JSON")
    }

    @Test func aNullPayloadForACaseWithoutOneIsNamedAsSuch() {
        #expect(
            detail(Stepper.self, #"{"increase":null}"#)
                == #"action 'increase' takes no payload: send "increase" or {"increase":{}}, not null"#)
        #expect(detail(List.self, #"{"reset":null}"#) == #"action 'reset' takes no payload: send "reset" or {"reset":{}}, not null"#)
        #expect(detail(Stepper.self, #"{"jump":null}"#) == "unknown action 'jump'")
    }

    @Test func theFormsThatNameACaseStillDecode() throws {
        let decoder = RawValueDecoder(List.self)
        #expect(try ActionDecoding.decode(List.self, from: Array(#""reset""#.utf8), rawValue: decoder) == .reset)
        #expect(try ActionDecoding.decode(List.self, from: Array(#"{"reset":{}}"#.utf8), rawValue: decoder) == .reset)
        #expect(
            try ActionDecoding.decode(List.self, from: Array(#"{"add":{"title":"milk"}}"#.utf8), rawValue: decoder) == .add(title: "milk"))
        #expect(
            try ActionDecoding.decode(Stepper.self, from: Array(#"{"decrease":{}}"#.utf8), rawValue: RawValueDecoder(Stepper.self))
                == .decrease)
    }
}
