import Dispatch
import Locking
import Logging

/// libmicrohttpd's own messages in the service's log (``ReactorServer`` hands them here unless
/// the app set a handler of its own).
///
/// What an operator must see is logged at `warning`: a failed `accept` (too many open files,
/// after which libmicrohttpd stops accepting for a while), memory or a system call failing. Those
/// can come once per connection, so under a flood of them one line a second is written, the next
/// one saying how many were left out. Anything else (a request libmicrohttpd could not parse and
/// answered 400 itself, a client that left while being answered) is routine and logged at
/// `debug`. An instance id in a path is replaced by its log label, as in the request log.
struct LibraryMessageLog: Sendable {
    /// One line for the log.
    struct Entry: Equatable {
        let level: Logger.Level
        let message: String
        /// Warnings left out since the last one written.
        let suppressed: Int
    }

    /// The shortest time between two warnings written.
    static let warningSpacing: UInt64 = 1_000_000_000

    private let logger: Logger
    private let now: @Sendable () -> UInt64
    /// When the last warning was written (nanoseconds of `now`), and how many were left out since.
    private let warnings = Locked<(last: UInt64?, suppressed: Int)>((nil, 0))

    /// `now` gives monotonic nanoseconds (injected by tests).
    init(logger: Logger, now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }) {
        self.logger = logger
        self.now = now
    }

    func log(_ message: String) {
        // Routine messages come with clients' mistakes and departures: not even formatted
        // unless the log shows them.
        if logger.logLevel > .debug, !Self.isOperational(message) { return }
        guard let entry = entry(for: message) else { return }
        var metadata: Logger.Metadata = ["component": "libmicrohttpd"]
        if entry.suppressed > 0 { metadata["suppressed"] = "\(entry.suppressed)" }
        logger.log(level: entry.level, "\(entry.message)", metadata: metadata)
    }

    /// The line `message` makes, or nil for a warning within ``warningSpacing`` of the last.
    func entry(for message: String) -> Entry? {
        let text = Self.redacted(message)
        guard Self.isOperational(message) else { return Entry(level: .debug, message: text, suppressed: 0) }
        let time = now()
        let suppressed = warnings.withLock { state -> Int? in
            if let last = state.last, time &- last < Self.warningSpacing {
                state.suppressed += 1
                return nil
            }
            defer { state = (time, 0) }
            return state.suppressed
        }
        return suppressed.map { Entry(level: .warning, message: text, suppressed: $0) }
    }

    /// Whether a message is one an operator must see (libmicrohttpd 0.9.75's wording).
    static func isOperational(_ message: String) -> Bool {
        let lowered = message.lowercased()
        return operationalWords.contains { lowered.contains($0) }
    }

    private static let operationalWords = [
        "connection limit", "accept", "memory", "internal error", "epoll", "too many", "mutex", "thread",
    ]

    /// `message` with each path in it shown as the request log shows it
    /// (``ReactorService/loggable(path:)``: no instance id in it whole), and its query left out.
    /// A path is a word with a `/` in it, between spaces or libmicrohttpd's quotes.
    static func redacted(_ message: String) -> String {
        var result = ""
        var word = ""
        for character in message {
            if character.isWhitespace || character == "'" || character == "`" || character == "\"" {
                result += loggable(word: word)
                result.append(character)
                word = ""
            } else {
                word.append(character)
            }
        }
        return result + loggable(word: word)
    }

    /// A word of a message as logs may show it: a path without its query, a sentence's full stop
    /// after it kept out of it.
    private static func loggable(word: String) -> String {
        guard word.contains("/") else { return word }
        var path = Substring(word)
        var stop = ""
        if let question = path.firstIndex(of: "?") {
            path = path[..<question]
        } else if path.count > 1, path.hasSuffix(".") {
            path = path.dropLast()
            stop = "."
        }
        return ReactorService.loggable(path: String(path)) + stop
    }
}
