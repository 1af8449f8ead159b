import Foundation
import SortedJSON
import TestSupport
import Testing

/// `JSONSyntax.isValid` against RFC 8259's grammar, and against Foundation's parser on damaged
/// documents.
@Suite struct JSONSyntaxTests {
    @Test(arguments: [
        "{}", "[]", " { } ", "\"\"", "0", "-0", "12", "-1.5", "1e5", "1E+5", "2.5e-3", "true", "false", "null",
        #"{"a":[1,{"b":null}],"c":"d"}"#, #""\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00""#, "[\t1 ,\n2\r]", "\"é ✓\"",
    ])
    func acceptsJSON(_ text: String) {
        #expect(JSONSyntax.isValid(Array(text.utf8)))
    }

    @Test(arguments: [
        "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\"}", "{\"a\" 1}", "{1:2}", "[1 2]", "01", "-", "1.", ".5", "+1",
        "1e", "1e+", "0x10", "tru", "nul", "True", "NaN", "Infinity", "\"abc", "\"\\x\"", "\"\\u12G4\"", "\"\\u12\"",
        "\"a\u{1}b\"", "\"a\nb\"", "{}{}", "{} x", "[1]]", "'a'",
    ])
    func refusesWhatIsNotJSON(_ text: String) {
        #expect(!JSONSyntax.isValid(Array(text.utf8)))
    }

    @Test func lineBreaksAreWhitespaceUnlessRefused() {
        for text in ["{\n}", "[1,\r\n2]", "\n3"] {
            #expect(JSONSyntax.isValid(Array(text.utf8)))
            #expect(!JSONSyntax.isValid(Array(text.utf8), lineBreaks: false))
        }
        #expect(JSONSyntax.isValid(Array("[1,\t2 ]".utf8), lineBreaks: false))
    }

    @Test func nestingDeeperThanTheLimitIsRefused() {
        let limit = JSONSyntax.depthLimit
        #expect(JSONSyntax.isValid(Array((String(repeating: "[", count: limit) + String(repeating: "]", count: limit)).utf8)))
        let deeper = String(repeating: "[", count: limit + 1) + String(repeating: "]", count: limit + 1)
        #expect(!JSONSyntax.isValid(Array(deeper.utf8)))
        #expect(!JSONSyntax.isValid(Array(String(repeating: "{\"a\":", count: 100_000).utf8)))
    }

    /// Valid documents with a few bytes changed, removed or added: where Foundation's parser is
    /// not lenient (it takes a comma before a closing bracket), both agree.
    @Test func agreesWithFoundationOnDamagedDocuments() {
        let documents = [
            #"{"alertMessage":{"count":12,"value":"increased!"},"isLoading":false,"value":1234}"#,
            #"[1,-2.5,"a\"b\\\u00e9",true,false,null,{},[],{"x":[0.1,{"y":"z"}]}]"#,
        ].map { Array($0.utf8) }
        // No exponent marks: Foundation refuses a number too large for a Double, which is JSON.
        let alphabet = Array(#"{}[]:,"\ -+.0123456789tfnrulsa"#.utf8) + [0x01, 0x09, 0x0A]
        var random = SplitMix64(seed: 0x15_0A11D)
        var accepted = 0
        for _ in 0..<20_000 {
            var bytes = documents[random.next(below: documents.count)]
            for _ in 0...random.next(below: 3) {
                let index = random.next(below: bytes.count)
                switch random.next(below: 3) {
                case 0: bytes[index] = alphabet[random.next(below: alphabet.count)]
                case 1: bytes.remove(at: index)
                default: bytes.insert(alphabet[random.next(below: alphabet.count)], at: index)
                }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            if text.contains(",}") || text.contains(",]") { continue }
            let valid = JSONSyntax.isValid(bytes)
            let parsed = (try? JSONSerialization.jsonObject(with: Data(bytes), options: .fragmentsAllowed)) != nil
            #expect(valid == parsed, "\(text.debugDescription)")
            if valid { accepted += 1 }
        }
        // Both outcomes were tried often.
        #expect(accepted > 1_000 && accepted < 19_000, "\(accepted)")
    }
}
