import Foundation
import Testing

@testable import ReactorHosting

@Suite struct JSONCodingTests {
    private struct Nested: Encodable {
        let depth: Int
        func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            if depth > 0 { try container.encode(Nested(depth: depth - 1)) }
        }
    }

    /// What a subscriber receives for a state that cannot be encoded: still JSON, saying why.
    @Test func aStateThatCannotBeEncodedBecomesAStringNamingTheError() throws {
        for bytes in [JSONCoding.encodeState(["value": Double.nan]), JSONCoding.encodeState(Nested(depth: 512))] {
            let text = try JSONDecoder().decode(String.self, from: Data(bytes))
            #expect(text.hasPrefix("state could not be encoded: "))
        }
    }
}
