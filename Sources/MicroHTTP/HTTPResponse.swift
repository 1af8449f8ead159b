import Locking

/// An HTTP response: a status, header fields and one of several body kinds.
public struct HTTPResponse: Sendable {
    /// How the body is produced.
    enum Body: Sendable {
        case bytes([UInt8])
        /// Sent as libmicrohttpd's one copy while `status` and `headers` are the prepared ones.
        case prepared(PreparedResponse)
        case stream(any HTTPStreamSource, HTTPHeartbeat?)
        case deferred(@Sendable (HTTPResponder) -> Void)
    }

    /// The status code (100–999; anything else is sent as 500).
    public var status: Int {
        didSet { unprepare() }
    }
    /// Header fields to send. `Content-Length` and `Transfer-Encoding` are set by the server.
    public var headers: HTTPHeaders {
        didSet { unprepare() }
    }
    var kind: Body

    /// A response with a fixed body.
    public init(status: Int, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.kind = .bytes(body)
    }

    init(status: Int, headers: HTTPHeaders, kind: Body) {
        self.status = status
        self.headers = headers
        self.kind = kind
    }

    /// A response sent as libmicrohttpd's one copy of `prepared` (see ``PreparedResponse``).
    public init(_ prepared: PreparedResponse) {
        self.init(status: prepared.status, headers: prepared.headers, kind: .prepared(prepared))
    }

    /// A changed status or header list no longer matches the prepared copy: send the body as an
    /// ordinary one.
    private mutating func unprepare() {
        if case .prepared(let prepared) = kind { kind = .bytes(prepared.body) }
    }

    /// The fixed body; empty for streamed and deferred responses. Setting it makes the body fixed.
    public var body: [UInt8] {
        get {
            switch kind {
            case .bytes(let bytes): bytes
            case .prepared(let prepared): prepared.body
            case .stream, .deferred: []
            }
        }
        set { kind = .bytes(newValue) }
    }

    /// Chunked streaming body pulled from `source`; heartbeat bytes written when idle for the interval.
    public static func stream(status: Int = 200, headers: HTTPHeaders, source: any HTTPStreamSource, heartbeat: HTTPHeartbeat? = nil)
        -> HTTPResponse
    {
        HTTPResponse(status: status, headers: headers, kind: .stream(source, heartbeat))
    }

    /// Reply later, from any thread, by calling `responder.respond(_:)` (only the first call counts).
    ///
    /// Until then the connection waits: held among the ready ones for up to
    /// ``HTTPServerConfiguration/deferredReplyHold`` (so a reply that comes within a durable
    /// store's commit costs no suspension), then suspended.
    public static func deferred(_ start: @escaping @Sendable (HTTPResponder) -> Void) -> HTTPResponse {
        HTTPResponse(status: 0, headers: [:], kind: .deferred(start))
    }

    /// Reply from a Swift task (built on `deferred`).
    public static func async(_ body: @escaping @Sendable () async -> HTTPResponse) -> HTTPResponse {
        deferred { responder in
            Task { responder.respond(await body()) }
        }
    }

    /// The response as a client receives it, for callers that run a router in-process (tests,
    /// as HummingbirdTesting does): a deferred response is awaited; any other is returned as it is.
    public func resolved() async -> HTTPResponse {
        guard case .deferred(let start) = kind else { return self }
        let response = await withCheckedContinuation { continuation in
            start(HTTPResponder(deliver: { continuation.resume(returning: $0) }))
        }
        return await response.resolved()
    }

    /// A plain-text response, handy for errors and tests.
    public static func text(_ text: String, status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Array(text.utf8))
    }
}

/// Heartbeat of a streamed response: `bytes` are written whenever nothing was written for `interval`.
public struct HTTPHeartbeat: Sendable {
    /// Idle time after which the heartbeat is written.
    public let interval: Duration
    /// The bytes written, e.g. `Array(": keep-alive\n\n".utf8)` for server-sent events.
    public let bytes: [UInt8]

    /// A heartbeat of `bytes` every `interval` of silence (at least 1 ms).
    public init(interval: Duration, bytes: [UInt8]) {
        self.interval = max(interval, .milliseconds(1))
        self.bytes = bytes
    }

    var nanoseconds: UInt64 { interval.nanoseconds }
}
