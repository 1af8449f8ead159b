import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An HTTP answer: status, headers (names in lower case) and body.
struct HTTPReply: Sendable {
    var status: Int
    var headers: [String: String]
    var body: Data

    init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    init(_ response: HTTPURLResponse, body: Data = Data()) {
        var headers: [String: String] = [:]
        for (name, value) in response.allHeaderFields {
            headers["\(name)".lowercased()] = "\(value)"
        }
        self.init(status: response.statusCode, headers: headers, body: body)
    }

    /// `Retry-After` in whole seconds, when the server sent one.
    var retryAfterSeconds: Int? {
        headers["retry-after"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.map { max(0, $0) }
    }

    /// The problem this answer describes.
    var problem: ReactorProblem { ReactorProblem(status: status, body: body, retryAfter: retryAfterSeconds) }
}

/// The client's HTTP requests to one server, over URLSession: a JSON request and its answer, or
/// an event stream's bytes as they arrive. An answer of 400 or more becomes a
/// ``ReactorProblem``; a `429` or `503` with `Retry-After` is sent again after that long, a
/// bounded number of times. Each request carries the token provider's bearer token, if any; a
/// `401` is sent again once with a refreshed one.
final class HTTPTransport: Sendable {
    /// The server's base URL.
    let server: URL
    private let session: URLSession
    private let policy: ReconnectPolicy
    private let tokenProvider: RemoteReactorConfiguration.TokenProvider?
    /// Whether each request closes its connection after the answer (see ``forActions(server:configuration:)``).
    private let closesConnections: Bool

    init(server: URL, configuration: RemoteReactorConfiguration, closesConnections: Bool = false) {
        self.server = server
        self.policy = configuration.reconnect
        self.tokenProvider = configuration.tokenProvider
        self.closesConnections = closesConnections
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        self.session = URLSession(configuration: configuration, delegate: nil, delegateQueue: SessionQueues.delegateQueue())
    }

    /// A transport for sending actions. With FoundationNetworking (Linux), libcurl sends a
    /// request again by itself when a kept-alive connection it reused dies before the answer,
    /// and a POST sent again that way goes without its body: the server waits for the body and
    /// the client for the answer until the request times out (a minute). Each action therefore
    /// opens a connection of its own there, so that a cut one fails at once and is retried with
    /// its idempotency key. Apple's URLSession reuses connections safely.
    static func forActions(server: URL, configuration: RemoteReactorConfiguration) -> HTTPTransport {
        #if canImport(FoundationNetworking)
            HTTPTransport(server: server, configuration: configuration, closesConnections: true)
        #else
            HTTPTransport(server: server, configuration: configuration)
        #endif
    }

    deinit { session.finishTasksAndInvalidate() }

    /// The URL of `path` (which starts with `/`) on the server, with `query` items.
    func url(_ path: String, query: [URLQueryItem] = []) -> URL {
        var components = URLComponents(url: server, resolvingAgainstBaseURL: false) ?? URLComponents()
        components.path = components.path.trimmingSuffix("/") + path
        components.queryItems = query.isEmpty ? nil : query
        return components.url ?? server
    }

    /// Whether requests carry a token (a token provider was configured).
    var authenticates: Bool { tokenProvider != nil }

    /// The bearer token to send: the provider's current one, or with `refresh` a new one after
    /// the server refused it. Nil without a provider, or when it has none.
    func token(refresh: Bool) async throws -> String? {
        try await tokenProvider?(refresh)
    }

    /// Sends one request and returns the server's answer when its status is below 400.
    /// - Throws: ``ReactorProblem`` for an answer of 400 or more (after the retries a `429` or
    ///   `503` with `Retry-After` earns, and after one refreshed token for a `401`); a
    ///   `URLError` when no answer came; what the token provider throws.
    func send(
        _ method: String, _ path: String, query: [URLQueryItem] = [], json body: Data? = nil,
        headers: [String: String] = [:]
    ) async throws -> HTTPReply {
        var request = URLRequest(url: url(path, query: query))
        request.httpMethod = method
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if closesConnections { request.setValue("close", forHTTPHeaderField: "Connection") }
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        var refusals = 0
        var token = try await token(refresh: false)
        var refreshed = false
        while true {
            request.setValue(token.map { "Bearer \($0)" }, forHTTPHeaderField: "Authorization")
            let (data, response) = try await SessionQueues.data(for: request, on: session)
            guard let http = response as? HTTPURLResponse else {
                throw RemoteReactorError.unexpectedResponse(status: 0, detail: "not an HTTP response")
            }
            let reply = HTTPReply(http, body: data)
            guard reply.status >= 400 else { return reply }
            // A token refused (expired, say): once more with a new one. The server did nothing.
            if reply.status == 401, authenticates, !refreshed {
                refreshed = true
                token = try await self.token(refresh: true)
                if token != nil { continue }
            }
            let problem = reply.problem
            guard
                let delay = policy.delay(
                    afterRefusal: problem, refusals: refusals,
                    wasWaiting: query.contains { $0.name == "wait" })
            else {
                throw problem
            }
            refusals += 1
            try await Task.sleep(for: delay)
        }
    }

    /// Opens an event stream with `GET path`, `Accept: text/event-stream`, the given
    /// `Last-Event-ID` and bearer `token`: the response first, then the body's bytes as they
    /// arrive. Ending the iteration (or cancelling its task) closes the connection.
    func eventStream(_ path: String, lastEventID: UInt64?, token: String?) -> AsyncThrowingStream<StreamPart, any Error> {
        var request = URLRequest(url: url(path))
        request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
        request.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let lastEventID { request.setValue(String(lastEventID), forHTTPHeaderField: "Last-Event-ID") }
        // Longer than the server's heartbeat (15 s by default): a silent stream is a dead one.
        request.timeoutInterval = policy.streamIdleTimeout.timeInterval
        return StreamingRequest.start(request)
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}

extension Duration {
    /// The duration in seconds, as Foundation counts time.
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
