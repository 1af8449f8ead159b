import Glibc
import Locking
import Logging
import ReactorHTTP

/// Writes each log entry to standard error as one JSON object on one line, for container log
/// collectors: `{"timestamp":"2026-01-02T03:04:05.678Z","level":"info","label":"reactor-server",
/// "source":"ReactorHTTP","message":"listening","metadata":{"port":"8080"}}`. Metadata keeps its
/// structure (strings, arrays, objects); the handler's own metadata and its metadata provider's
/// are merged under the entry's, and an entry's error is its metadata's `error`.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.metadataProvider = metadataProvider
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let explicit = event.metadata { merged.merge(explicit) { _, new in new } }
        if let error = event.error { merged["error"] = "\(error)" }
        let level = event.level
        let source = event.source
        let message = event.message
        var text = #"{"timestamp":"#
        Self.appendString(RFC3339.now(), to: &text)
        text += #","level":"#
        Self.appendString(level.rawValue, to: &text)
        text += #","label":"#
        Self.appendString(label, to: &text)
        text += #","source":"#
        Self.appendString(source, to: &text)
        text += #","message":"#
        Self.appendString(message.description, to: &text)
        text += #","metadata":"#
        Self.appendObject(merged, to: &text)
        text += "}\n"
        Self.output.write(text)
    }

    /// Standard error, written one whole line at a time.
    static let output = LineWriter(fileDescriptor: 2)

    static func appendObject(_ metadata: Logger.Metadata, to text: inout String) {
        text += "{"
        for (index, key) in metadata.keys.sorted().enumerated() {
            if index > 0 { text += "," }
            appendString(key, to: &text)
            text += ":"
            appendValue(metadata[key]!, to: &text)
        }
        text += "}"
    }

    static func appendValue(_ value: Logger.Metadata.Value, to text: inout String) {
        switch value {
        case .string(let string): appendString(string, to: &text)
        case .stringConvertible(let convertible): appendString(convertible.description, to: &text)
        case .dictionary(let dictionary): appendObject(dictionary, to: &text)
        case .array(let array):
            text += "["
            for (index, element) in array.enumerated() {
                if index > 0 { text += "," }
                appendValue(element, to: &text)
            }
            text += "]"
        }
    }

    /// `string` as a JSON string: quotes, backslashes and control characters escaped (so an
    /// entry never spans two lines), everything else as it is.
    static func appendString(_ string: String, to text: inout String) {
        text += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case let control where control.value < 0x20 || control.value == 0x2028 || control.value == 0x2029:
                let hex = String(control.value, radix: 16)
                text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: text.unicodeScalars.append(scalar)
            }
        }
        text += "\""
    }
}

/// Writes whole lines to a file descriptor, one writer at a time, so that lines from several
/// threads never interleave.
final class LineWriter: Sendable {
    /// The descriptor, behind the lock every line is written under.
    private let lock: Locked<Int32>

    init(fileDescriptor: Int32) {
        lock = Locked(fileDescriptor)
    }

    func write(_ line: String) {
        var line = line
        lock.withLock { descriptor in
            line.withUTF8 { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                    if written > 0 {
                        offset += written
                    } else if written < 0 && errno == EINTR {
                        continue
                    } else {
                        return
                    }
                }
            }
        }
    }
}
