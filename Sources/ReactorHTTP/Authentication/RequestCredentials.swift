/// Reads credentials out of request headers: the bearer token of an `Authorization` header
/// (RFC 6750 §2.1) and a cookie's value (RFC 6265 §4.2). Never logs what it reads.
enum RequestCredentials {
    /// What an `Authorization` header holds.
    enum Authorization: Equatable {
        /// `Bearer <token>`.
        case bearer(String)
        /// Another scheme (`Basic …`): left to the authenticator, which may read the header.
        case otherScheme
        /// `Bearer` without a token in the form RFC 6750 allows.
        case malformedBearer
    }

    /// Parses an `Authorization` header's value: the scheme (any case), one or more spaces, and
    /// a token of `A–Z a–z 0–9 - . _ ~ + /` followed by any `=` (RFC 6750's `b64token`).
    static func authorization(_ value: String) -> Authorization {
        let utf8 = Array(value.utf8)
        var index = 0
        while index < utf8.count, utf8[index] != 0x20 { index += 1 }
        let scheme = utf8[0..<index]
        guard scheme.count == 6, String(decoding: scheme, as: UTF8.self).lowercased() == "bearer" else {
            return .otherScheme
        }
        while index < utf8.count, utf8[index] == 0x20 { index += 1 }
        var end = utf8.count
        while end > index, utf8[end - 1] == 0x20 { end -= 1 }
        let token = utf8[index..<end]
        guard !token.isEmpty else { return .malformedBearer }
        var seenPadding = false
        for byte in token {
            if byte == UInt8(ascii: "=") {
                seenPadding = true
            } else if seenPadding || !isTokenCharacter(byte) {
                return .malformedBearer
            }
        }
        guard token.first != UInt8(ascii: "=") else { return .malformedBearer }
        return .bearer(String(decoding: token, as: UTF8.self))
    }

    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "+"), UInt8(ascii: "/"):
            return true
        default:
            return false
        }
    }

    /// The value of the cookie `name` in a `Cookie` header's value (`a=1; b=2`), without the
    /// double quotes a value may be sent in; nil when it is not there or empty.
    static func cookie(named name: String, in header: String) -> String? {
        for pair in header.split(separator: ";") {
            guard let equals = pair.firstIndex(of: "=") else { continue }
            guard pair[..<equals].trimmingSpaces == name else { continue }
            var value = pair[pair.index(after: equals)...].trimmingSpaces
            if value.utf8.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            return value.isEmpty ? nil : value
        }
        return nil
    }
}
