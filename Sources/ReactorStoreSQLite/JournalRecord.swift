import ReactorHosting

/// One committed batch of writes as the journal keeps it in one row: each write as a tag byte and
/// its fields, integers as 8 bytes little-endian, strings and blobs as a 4-byte length and their
/// bytes.
struct JournalRecord {
    /// The writes, in order.
    let writes: [SessionWrite]

    init(_ writes: [SessionWrite]) {
        self.writes = writes
    }

    private enum Tag: UInt8 {
        case create = 1, accept, settle, version, touch, delete, release
    }

    /// The record's bytes.
    func encoded() -> [UInt8] {
        var writer = Writer()
        for write in writes {
            switch write {
            case .create(let id, let type, let state, let lastActivity):
                writer.tag(.create)
                writer.string(id)
                writer.string(type)
                writer.blob(state)
                writer.integer(UInt64(bitPattern: lastActivity))
            case .accept(let id, let seq, let action):
                writer.tag(.accept)
                writer.string(id)
                writer.integer(seq)
                writer.blob(action)
            case .settle(let id, let seq):
                writer.tag(.settle)
                writer.string(id)
                writer.integer(seq)
            case .version(let id, let version, let state, let startedThrough, let producedBy, let lastActivity):
                writer.tag(.version)
                writer.string(id)
                writer.integer(version)
                writer.blob(state)
                writer.integer(startedThrough)
                writer.integer(producedBy)
                writer.integer(UInt64(bitPattern: lastActivity))
            case .touch(let id, let lastActivity):
                writer.tag(.touch)
                writer.string(id)
                writer.integer(UInt64(bitPattern: lastActivity))
            case .delete(let id):
                writer.tag(.delete)
                writer.string(id)
            case .release(let id):
                writer.tag(.release)
                writer.string(id)
            }
        }
        return writer.bytes
    }

    /// The record in `bytes`; nil when they are not one (a damaged journal).
    init?(decoding bytes: [UInt8]) {
        var reader = Reader(bytes: bytes)
        var writes: [SessionWrite] = []
        while !reader.isAtEnd {
            guard let raw = reader.byte(), let tag = Tag(rawValue: raw), let id = reader.string() else { return nil }
            switch tag {
            case .create:
                guard let type = reader.string(), let state = reader.blob(), let activity = reader.integer() else { return nil }
                writes.append(.create(id: id, type: type, state: state, lastActivity: Int64(bitPattern: activity)))
            case .accept:
                guard let seq = reader.integer(), let action = reader.blob() else { return nil }
                writes.append(.accept(id: id, seq: seq, action: action))
            case .settle:
                guard let seq = reader.integer() else { return nil }
                writes.append(.settle(id: id, seq: seq))
            case .version:
                guard let version = reader.integer(), let state = reader.blob(), let startedThrough = reader.integer(),
                      let producedBy = reader.integer(), let activity = reader.integer() else { return nil }
                writes.append(.version(id: id, version: version, state: state, startedThrough: startedThrough,
                                       producedBy: producedBy, lastActivity: Int64(bitPattern: activity)))
            case .touch:
                guard let activity = reader.integer() else { return nil }
                writes.append(.touch(id: id, lastActivity: Int64(bitPattern: activity)))
            case .delete:
                writes.append(.delete(id: id))
            case .release:
                writes.append(.release(id: id))
            }
        }
        self.writes = writes
    }

    private struct Writer {
        var bytes: [UInt8] = []

        mutating func tag(_ tag: Tag) { bytes.append(tag.rawValue) }

        mutating func integer(_ value: UInt64) {
            for index in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(index)))) }
        }

        mutating func length(_ count: Int) {
            for index in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: count >> (8 * index))) }
        }

        mutating func string(_ text: String) {
            length(text.utf8.count)
            bytes.append(contentsOf: text.utf8)
        }

        mutating func blob(_ blob: [UInt8]) {
            length(blob.count)
            bytes.append(contentsOf: blob)
        }
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        var isAtEnd: Bool { offset >= bytes.count }

        mutating func byte() -> UInt8? {
            guard offset < bytes.count else { return nil }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func fixed(_ width: Int) -> UInt64? {
            guard offset + width <= bytes.count else { return nil }
            var value: UInt64 = 0
            for index in (0..<width).reversed() { value = value << 8 | UInt64(bytes[offset + index]) }
            offset += width
            return value
        }

        mutating func integer() -> UInt64? { fixed(8) }

        mutating func blob() -> [UInt8]? {
            guard let count = fixed(4).map(Int.init), offset + count <= bytes.count else { return nil }
            defer { offset += count }
            return Array(bytes[offset..<offset + count])
        }

        mutating func string() -> String? {
            blob().map { String(decoding: $0, as: UTF8.self) }
        }
    }
}
