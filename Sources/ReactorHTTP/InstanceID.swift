/// Unguessable instance ids: 128 bits from the system's CSPRNG (`getrandom` on Linux),
/// written in URL-safe base64 without padding (22 characters).
enum InstanceID {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        let high = generator.next() as UInt64
        let low = generator.next() as UInt64
        var bytes: [UInt8] = []
        bytes.reserveCapacity(22)
        // 128 bits = 21 groups of 6 bits + 2 bits.
        var value = (high, low)
        for _ in 0..<22 {
            bytes.append(alphabet[Int(value.1 & 0x3F)])
            value.1 = (value.1 >> 6) | (value.0 << 58)
            value.0 >>= 6
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether `text` could be an id at all (cheap check before a lookup).
    static func isWellFormed(_ text: String) -> Bool {
        text.utf8.count == 22 && text.utf8.allSatisfy(isAlphabetByte)
    }

    private static func isAlphabetByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }
}
