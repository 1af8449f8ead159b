import Foundation
import ReactorHosting

extension JSONCoding {
    /// Decodes a JSON body, turning Foundation's errors into a sentence that names the problem.
    static func decodeBody<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws(Problem) -> Value {
        guard isUTF8(bytes) else { throw Problem.invalidBody("the body is not UTF-8 (JSON must be UTF-8, RFC 8259)") }
        do {
            return try decoder.decode(type, from: Data(bytes))
        } catch let error as DecodingError {
            throw Problem.invalidBody(describe(error))
        } catch {
            throw Problem.invalidBody("the body is not valid JSON: \(error)")
        }
    }

}
