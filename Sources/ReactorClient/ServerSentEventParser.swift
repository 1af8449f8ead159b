/// One event of a `text/event-stream`, as its fields arrived.
package struct ServerSentEvent: Sendable, Equatable {
    /// The `id:` field, nil when the event had none.
    package var id: String?
    /// The `event:` field; `message` when the event named none.
    package var name: String
    /// The `data:` lines, joined by line feeds.
    package var data: String
    /// Whether a comment line (`: snapshot`) marked this event as skipping versions.
    package var isSnapshot: Bool

    package init(id: String? = nil, name: String = "message", data: String = "", isSnapshot: Bool = false) {
        self.id = id
        self.name = name
        self.data = data
        self.isSnapshot = isSnapshot
    }
}

/// Parses the `text/event-stream` format (WHATWG HTML, "Server-sent events") from bytes as they
/// arrive, in chunks split anywhere: lines end in LF, CRLF or CR; `field: value` lines build an
/// event that a blank line dispatches; comment lines start with a colon.
package struct ServerSentEventParser: Sendable {
    /// The last `retry:` hint, in milliseconds.
    package private(set) var retryMilliseconds: Int?

    private var line: [UInt8] = []
    private var event = ServerSentEvent()
    private var dataLines: [String] = []
    private var sawCarriageReturn = false
    private var atStart = true

    package init() {}

    /// Reads `bytes`; returns the events they completed, in order.
    package mutating func feed(_ bytes: some Sequence<UInt8>) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            switch byte {
            case 0x0A where sawCarriageReturn:
                sawCarriageReturn = false  // the LF of a CRLF: the line already ended
            case 0x0A, 0x0D:
                sawCarriageReturn = byte == 0x0D
                if let event = endLine() { events.append(event) }
            default:
                sawCarriageReturn = false
                line.append(byte)
            }
        }
        return events
    }

    private mutating func endLine() -> ServerSentEvent? {
        defer { line.removeAll(keepingCapacity: true) }
        if atStart {
            atStart = false
            if line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }  // a byte order mark
        }
        guard let first = line.first else { return dispatch() }
        let text = String(decoding: line, as: UTF8.self)
        if first == UInt8(ascii: ":") {
            if text.dropFirst().trimmingPrefix(" ") == "snapshot" { event.isSnapshot = true }
            return nil
        }
        let field: Substring
        var value: Substring
        if let colon = text.firstIndex(of: ":") {
            field = text[..<colon]
            value = text[text.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
        } else {
            field = text[...]
            value = ""
        }
        switch field {
        case "id" where !value.contains("\0"): event.id = String(value)
        case "event": event.name = String(value)
        case "data": dataLines.append(String(value))
        case "retry":
            if !value.isEmpty, value.allSatisfy(\.isASCIIDigit), let milliseconds = Int(value) {
                retryMilliseconds = milliseconds
            }
        default: break
        }
        return nil
    }

    /// A blank line: the event built so far, if it has data; either way a new one starts.
    private mutating func dispatch() -> ServerSentEvent? {
        defer {
            event = ServerSentEvent()
            dataLines.removeAll()
        }
        guard !dataLines.isEmpty else { return nil }
        var complete = event
        complete.data = dataLines.joined(separator: "\n")
        if complete.name.isEmpty { complete.name = "message" }
        return complete
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
