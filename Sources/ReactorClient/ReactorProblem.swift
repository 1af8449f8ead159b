import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A request the server refused: its `application/problem+json` answer (RFC 9457).
///
/// ```swift
/// do {
///     try await RemoteReactor<CounterReactor>.attach(id: savedID, at: server)
/// } catch let problem as ReactorProblem where problem.kind == "unknown-instance" {
///     // the session was deleted or expired: create a new one
/// }
/// ```
public struct ReactorProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// The problem's `type` URI, for example `urn:reactor-server:problem:invalid-action`.
    public var type: String
    /// A short summary of the kind of problem.
    public var title: String
    /// What was wrong with this request in particular.
    public var detail: String
    /// The HTTP status code.
    public var status: Int
    /// Seconds after which a retry may succeed (the `Retry-After` header), if the server said.
    public var retryAfter: Int?

    /// The URI prefix of every problem `type` the server answers with.
    public static let typePrefix = "urn:reactor-server:problem:"

    /// Creates a problem.
    public init(type: String, title: String, detail: String, status: Int, retryAfter: Int? = nil) {
        self.type = type
        self.title = title
        self.detail = detail
        self.status = status
        self.retryAfter = retryAfter
    }

    /// The last segment of ``type``, stable across versions: `unknown-instance`,
    /// `invalid-action`, `body-too-large`, `too-many-instances` … (see openapi.yaml).
    public var kind: String {
        type.hasPrefix(Self.typePrefix) ? String(type.dropFirst(Self.typePrefix.count)) : type
    }

    /// `404 Unknown reactor instance: … (urn:…)`.
    public var description: String { "\(status) \(title): \(detail) (\(type))" }

    /// The problem a response with `status` and `body` describes: its problem+json fields when
    /// the body has them, else the status and the body's text.
    init(status: Int, body: Data, retryAfter: Int?) {
        struct Fields: Decodable {
            var type: String?
            var title: String?
            var detail: String?
        }
        let fields = try? JSONDecoder().decode(Fields.self, from: body)
        let text = String(decoding: body.prefix(512), as: UTF8.self)
        self.init(
            type: fields?.type ?? "about:blank",
            title: fields?.title ?? HTTPURLResponse.localizedString(forStatusCode: status),
            detail: fields?.detail ?? text,
            status: status,
            retryAfter: retryAfter)
    }
}
