/// Unguessable instance ids: 128 bits from the system's CSPRNG (`getrandom` on Linux),
/// written in URL-safe base64 without padding (22 characters).
package enum InstanceID {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// The characters of an id.
    package static let length = 22

    package static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        let high = generator.next() as UInt64
        let low = generator.next() as UInt64
        var bytes: [UInt8] = []
        bytes.reserveCapacity(length)
        // 128 bits = 21 groups of 6 bits + 2 bits.
        var value = (high, low)
        for _ in 0..<length {
            bytes.append(alphabet[Int(value.1 & 0x3F)])
            value.1 = (value.1 >> 6) | (value.0 << 58)
            value.0 >>= 6
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// What logs show of an id: a short hash, never the id itself (an id is its owner's only
    /// credential). Equal ids give equal labels, so log lines of one instance can be matched.
    package static func logLabel(_ id: String) -> String {
        // FNV-1a, 64 bits, shown as its top 32 bits in hex: enough to tell instances apart in a
        // log, far too little to find an id from.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in id.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        let hex = String(hash >> 32, radix: 16)
        return "#" + String(repeating: "0", count: 8 - hex.count) + hex
    }

    /// The 6-bit value of one character of the alphabet; nil for any other byte.
    static func sextet(_ byte: UInt8) -> UInt64? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): UInt64(byte - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): UInt64(byte - UInt8(ascii: "a")) + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt64(byte - UInt8(ascii: "0")) + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }
}

/// An id's 22 characters packed into integers (6 bits each, nothing lost), so finding an
/// instance compares values held in the table instead of following a pointer to each
/// candidate's text.
package struct InstanceKey: Hashable, Sendable {
    /// Characters 0..<10.
    let head: UInt64
    /// Characters 10..<20.
    let middle: UInt64
    /// Characters 20..<22.
    let tail: UInt16

    /// The key of `text`; nil unless it is 22 characters of the id alphabet.
    package init?(_ text: String) {
        var text = text
        guard let key = text.withUTF8(InstanceKey.init(utf8:)) else { return nil }
        self = key
    }

    /// The key of an id's UTF-8; nil unless it is 22 characters of the id alphabet.
    package init?(utf8 bytes: UnsafeBufferPointer<UInt8>) {
        guard bytes.count == 22,
            let head = Self.pack(bytes, 0..<10), let middle = Self.pack(bytes, 10..<20),
            let tail = Self.pack(bytes, 20..<22)
        else { return nil }
        self.init(head: head, middle: middle, tail: UInt16(tail))
    }

    /// The characters at `range` as 6-bit values, the first in the highest bits.
    private static func pack(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> UInt64? {
        var packed: UInt64 = 0
        for index in range {
            guard let value = InstanceID.sextet(bytes[index]) else { return nil }
            packed = packed << 6 | value
        }
        return packed
    }

    private init(head: UInt64, middle: UInt64, tail: UInt16) {
        self.head = head
        self.middle = middle
        self.tail = tail
    }
}
