import Foundation
import Logging
import MicroHTTP
import ReactorExamples
import Synchronization

@testable import ReactorHTTP
@testable import ReactorHosting

/// One fuzz input. Its first byte picks what it drives:
///
/// - `0`, `1`, `2`: the rest is a body decoded as a Counter, Todo or Search action.
/// - `3`: the rest is a `Last-Event-ID` for an event stream on the counter, which has published
///   a few states: the stream is built (it reads the history to plan its replay) but not opened.
/// - `4`: the rest is the credentials of a request to a service that authenticates: up to the
///   first newline an `Authorization` header's value, after it a `Cookie` header's; the request
///   reads the counter's instance (created by a subject) through the parsers of both headers.
/// - anything else: the rest is a request, `METHOD TARGET` on the first line, `Name: value`
///   header lines, an empty line, then the body. `{counter}`, `{todo}` and `{search}` in the
///   target stand for live instances' ids.
///
/// Invariants (a violation traps, which libFuzzer reports as a crash): no crash; decoding either
/// succeeds or fails with a 400 problem; every answer has a status in 100...599, never 500; every
/// 4xx/5xx answer is `application/problem+json` whose JSON names the same status.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let selector = bytes.first else { return 0 }
    let rest = Array(bytes.dropFirst())
    switch selector {
    case 0: checkDecoding(CounterReactor.Action.self, rest)
    case 1: checkDecoding(TodoReactor.Action.self, rest)
    case 2: checkDecoding(SearchReactor.Action.self, rest)
    case 3: FuzzService.shared.checkResume(lastEventID: rest)
    case 4: AuthenticatedFuzzService.shared.check(credentials: rest)
    default: FuzzService.shared.check(rest)
    }
    return 0
}

func checkDecoding<Action: Decodable>(_ type: Action.Type, _ body: [UInt8]) {
    do {
        _ = try ActionDecoding.decode(type, from: body, rawValue: RawValueDecoder(type))
    } catch {
        guard case .invalidAction = error else { preconditionFailure("unexpected refusal \(error)") }
        precondition(Problem(error).status == 400, "unexpected problem \(error)")
    }
}

/// The id in the answer to a creation of `type`; traps when it created nothing.
func createdID(_ response: HTTPResponse, _ type: String) -> String {
    guard let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any],
        let id = object["id"] as? String
    else { preconditionFailure("could not create \(type)") }
    return id
}

/// A reactor service without a server, its router called directly.
final class FuzzService: Sendable {
    static let shared = FuzzService()

    private let service: ReactorService
    private let router: Router
    private let ids = Mutex<[String: String]>([:])
    private let runs = Atomic<Int>(0)

    init() {
        var registry = ReactorHosting.ReactorRegistry()
        registry.register("counter") { CounterReactor(delay: .zero) }
        registry.register("todo") { TodoReactor() }
        registry.register("search") { SearchReactor(latency: .zero) }
        var configuration = ReactorServiceConfiguration()
        configuration.maxInstances = 64
        var logger = Logger(label: "fuzz")
        logger.logLevel = .error
        service = ReactorService(registry: registry, configuration: configuration, logger: logger)
        router = service.makeRouter()
        renew()
    }

    /// Replaces the live instances (bounding their memory and undoing deletes).
    private func renew() {
        service.disposeAllInstances()
        var fresh: [String: String] = [:]
        for type in ["counter", "todo", "search"] {
            let response = router.handle(
                HTTPRequest(
                    method: .POST, target: "/reactors",
                    headers: ["Content-Type": "application/json"],
                    body: Array(#"{"type":"\#(type)"}"#.utf8)))
            fresh[type] = createdID(response, type)
        }
        ids.withLock { $0 = fresh }
        for _ in 0..<3 {
            _ = router.handle(
                HTTPRequest(
                    method: .POST, target: "/reactors/\(fresh["counter"]!)/actions",
                    headers: ["Content-Type": "application/json"], body: Array(#""increase""#.utf8)))
        }
    }

    /// Whatever the id, planning the resumption must not trap; one that is not a version is a 400.
    func checkResume(lastEventID input: [UInt8]) {
        guard let id = ids.withLock({ $0["counter"] }), let instance = service.table.instance(id) else { return }
        let request = HTTPRequest(
            method: .GET, target: "/reactors/\(id)/events",
            headers: ["Last-Event-ID": String(decoding: input, as: UTF8.self)], body: [])
        let lastEventID: UInt64?
        do {
            lastEventID = try ReactorService.lastEventID(request)
        } catch {
            precondition(error.status == 400, "unexpected problem \(error)")
            return
        }
        _ = EventSubscriber(timeline: instance.timeline, resumingAfter: lastEventID, retryMilliseconds: 1000) {}
    }

    func check(_ input: [UInt8]) {
        if runs.add(1, ordering: .relaxed).newValue % 2_000 == 0 { renew() }
        let request = makeRequest(input)
        let response = router.handle(request)
        let status = response.status
        // A deferred reply (`?wait=true` on an accepted action) has no status until it is sent,
        // which needs a connection; the action itself was decoded and accepted.
        if status == 0, request.query["wait"] != nil { return }
        precondition((100...599).contains(status), "status \(status)")
        precondition(status != 500, "internal error for \(request.method.rawValue) \(request.path)")
        guard status >= 400 else { return }
        let body = response.body
        precondition(response.headers["Content-Type"] == "application/problem+json", "\(status) without problem+json")
        let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]
        precondition(object?["status"] as? Int == status, "problem body does not name \(status)")
    }

    private func makeRequest(_ input: [UInt8]) -> HTTPRequest {
        let split = input.firstRange(of: [0x0A, 0x0A])
        let head = String(decoding: split.map { input[..<$0.lowerBound] } ?? input[...], as: UTF8.self)
        let body = split.map { Array(input[$0.upperBound...]) } ?? []
        var lines = head.split(separator: "\n", omittingEmptySubsequences: false)
        let requestLine = lines.isEmpty ? "" : lines.removeFirst()
        let parts = requestLine.split(separator: " ", maxSplits: 1)
        var method = HTTPMethod(rawValue: parts.first.map(String.init) ?? "GET")
        var target = parts.count > 1 ? String(parts[1]) : "/"
        for (name, id) in ids.withLock({ $0 }) { target = target.replacingOccurrences(of: "{\(name)}", with: id) }
        // An event stream would stay attached with no connection to end it: ask with HEAD.
        if method == .GET, target.split(separator: "?").first?.hasSuffix("/events") == true { method = .HEAD }
        var headers = HTTPHeaders()
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.add(String(line[..<colon]), String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces))
        }
        return HTTPRequest(method: method, target: target, headers: headers, body: body)
    }
}

/// A service that authenticates its callers (tokens `a` and `b` are two subjects, `admin` an
/// admin), its router called directly with fuzzed credentials.
final class AuthenticatedFuzzService: Sendable {
    static let shared = AuthenticatedFuzzService()

    struct Tokens: Authenticator {
        func authenticate(_ request: AuthenticationRequest) throws(AuthenticationFailure) -> String? {
            guard let token = request.token else { return nil }
            guard ["a", "b", "admin"].contains(token) else { throw AuthenticationFailure("unknown token \(token.prefix(8))") }
            return token
        }
    }

    private let router: Router
    private let id: String

    init() {
        var registry = ReactorHosting.ReactorRegistry()
        registry.register("counter") { CounterReactor(delay: .zero) }
        var configuration = ReactorServiceConfiguration()
        var authentication = AuthenticationConfiguration(authenticator: Tokens())
        authentication.cookieName = "token"
        authentication.adminSubjects = ["admin"]
        configuration.authentication = authentication
        var logger = Logger(label: "fuzz")
        logger.logLevel = .error
        router = ReactorService(registry: registry, configuration: configuration, logger: logger).makeRouter()
        let created = router.handle(
            HTTPRequest(
                method: .POST, target: "/reactors", headers: ["Authorization": "Bearer a"], body: Array(#"{"type":"counter"}"#.utf8)))
        self.id = createdID(created, "counter")
    }

    /// Whatever the credentials: no crash; 200 for its subject or the admin, 404 for the other,
    /// 401 with a one-line Bearer challenge otherwise.
    func check(credentials input: [UInt8]) {
        let split = input.firstIndex(of: 0x0A)
        let authorization = String(decoding: input[..<(split ?? input.endIndex)], as: UTF8.self)
        let cookie = split.map { String(decoding: input[input.index(after: $0)...], as: UTF8.self) }
        _ = RequestCredentials.authorization(authorization)
        if let cookie { _ = RequestCredentials.cookie(named: "token", in: cookie) }
        var headers = HTTPHeaders()
        headers.add("Authorization", authorization)
        if let cookie { headers.add("Cookie", cookie) }
        let response = router.handle(HTTPRequest(method: .GET, target: "/reactors/\(id)", headers: headers, body: []))
        precondition([200, 401, 404].contains(response.status), "status \(response.status)")
        guard response.status == 401 else { return }
        let challenge = response.headers["WWW-Authenticate"] ?? ""
        precondition(challenge.hasPrefix(#"Bearer realm="reactor-server""#), "challenge \(challenge)")
        precondition(!challenge.utf8.contains { $0 < 0x20 || $0 == 0x7F }, "a control character in the challenge")
    }
}
