import Foundation
import Locking
import ReactorCore
import ReactorExamples
import ReactorHTTP
import ReactorHosting
import TestSupport
import Testing

/// Owners: with an `Authenticator`, a session belongs to the subject that created it. No valid
/// credentials: 401 with a `WWW-Authenticate: Bearer` challenge, nothing done; another subject:
/// 404 exactly as for an id that does not exist, on every route; the admin routes for admins.
/// (`Tests/python/test_owners.py` does the same through `--auth jwt` with real tokens.)
@Suite struct OwnersTests {
    /// Tokens of three subjects, one of them an admin; "expired" is refused.
    struct Tokens: Authenticator {
        func authenticate(_ request: AuthenticationRequest) throws(AuthenticationFailure) -> String? {
            switch request.token {
            case nil: return nil
            case "token-a": return "alice"
            case "token-b": return "bob"
            case "token-root": return "root"
            // Subjects Swift's `==` takes for the others (canonically equivalent), and a NUL.
            case "token-cafe": return "caf\u{E9}"
            case "token-cafe-combining": return "cafe\u{301}"
            case "token-kelly": return "Kelly"
            case "token-kelvin": return "\u{212A}elly"
            case "token-root-combining": return "roo\u{74}\u{307}"
            case "token-bob-nul": return "bob\u{0}"
            case "token-brief": return "alice"
            case "expired": throw AuthenticationFailure("the token has expired")
            default: throw AuthenticationFailure("unknown token")
            }
        }

        /// "token-brief" expires 300 ms after it is presented; the others never do.
        func credentialsExpiry(of request: AuthenticationRequest) -> Date? {
            request.token == "token-brief" ? Date().addingTimeInterval(0.3) : nil
        }
    }

    /// What each factory call was given.
    final class Subjects: Sendable {
        let seen = Locked<[String?]>([])
    }

    static func registry(_ subjects: Subjects) -> ReactorRegistry {
        var registry = ReactorRegistry()
        registry.register("counter") { (context: CreationContext) in
            subjects.seen.withLock { $0.append(context.subject) }
            return CounterReactor(delay: .zero)
        }
        return registry
    }

    static func server(
        store: (any SessionStore)? = nil, subjects: Subjects = Subjects(),
        _ configure: (inout AuthenticationConfiguration, inout ReactorServiceConfiguration) -> Void = { _, _ in }
    ) -> ReactorServer {
        inProcessServer(registry: registry(subjects)) { configuration in
            var authentication = AuthenticationConfiguration(authenticator: Tokens())
            authentication.adminSubjects = ["root"]
            authentication.adminToken = "scrape-secret"
            configuration.store = store
            configure(&authentication, &configuration)
            configuration.authentication = authentication
        }
    }

    static let alice = ["Authorization": "Bearer token-a"]
    static let bob = ["Authorization": "Bearer token-b"]
    static let root = ["Authorization": "Bearer token-root"]

    @Test func withoutValidCredentialsEveryRouteOnReactorsIs401AndNothingIsDone() async throws {
        let store = InMemorySessionStore(historyCapacity: 16)
        let server = Self.server(store: store)
        try server.start()
        defer { server.shutdown() }
        let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
        let id = try await client.create("counter", headers: Self.alice)
        let refusals: [(headers: [String: String], invalid: Bool)] = [
            ([:], false),
            (["Authorization": "Bearer"], true),
            (["Authorization": "Bearer a b"], true),
            (["Authorization": "Bearer token-a=x"], true),
            (["Authorization": "Bearer expired"], true),
            (["Authorization": "Bearer forged"], true),
            (["Authorization": "Basic dXNlcjpwYXNz"], false),
            // The cookie and the query parameter count only where the service says so.
            (["Cookie": "session=token-a"], false),
        ]
        for (headers, invalid) in refusals {
            for (method, path, body) in [
                ("POST", "/reactors", #"{"type":"counter"}"#), ("GET", "/reactors/\(id)", nil),
                ("POST", "/reactors/\(id)/actions", #""increase""#), ("GET", "/reactors/\(id)/events", nil),
                ("DELETE", "/reactors/\(id)", nil), ("GET", "/reactors/\(id)?access_token=token-a", nil),
            ] {
                let reply = try await client.send(method, path, body: body, headers: headers)
                #expect(reply.status == 401, "\(method) \(path) with \(headers): \(reply.status)")
                #expect(reply.header("Content-Type") == "application/problem+json")
                #expect(reply.json["type"] as? String == "urn:reactor-server:problem:unauthenticated")
                let challenge = reply.header("WWW-Authenticate") ?? ""
                #expect(challenge.hasPrefix(#"Bearer realm="reactor-server""#), "\(challenge)")
                #expect(challenge.contains(#"error="invalid_token""#) == invalid, "\(headers): \(challenge)")
            }
        }
        #expect(server.service.instanceCount == 1)
        #expect(try store.count() == 1)
        let state = try await client.get("/reactors/\(id)", headers: Self.alice)
        #expect(state.json["version"] as? Int == 0)
        // Open routes stay open.
        for path in ["/healthz", "/readyz", "/types", "/", "/inspector"] {
            #expect(try await client.get(path).status == 200, "\(path)")
        }
    }

    @Test func anotherSubjectsSessionIs404OnEveryRouteExactlyAsAnUnknownID() async throws {
        let store = InMemorySessionStore(historyCapacity: 16)
        let server = Self.server(store: store)
        try server.start()
        defer { server.shutdown() }
        let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
        let id = try await client.create("counter", headers: Self.alice)
        let increased = try await client.post("/reactors/\(id)/actions?wait=true", #""increase""#, headers: Self.alice)
        #expect(increased.status == 200)
        let before = try #require(try store.load(id: id))
        let unknown = "AAAAAAAAAAAAAAAAAAAAAA"
        for (method, suffix, body) in [
            ("GET", "", nil), ("POST", "/actions", #""increase""#), ("POST", "/actions?wait=true", #""increase""#),
            ("GET", "/events", nil), ("GET", "/events?format=patch", nil), ("DELETE", "", nil),
        ] as [(String, String, String?)] {
            let theirs = try await client.send(method, "/reactors/\(id)\(suffix)", body: body, headers: Self.bob)
            let nobodys = try await client.send(method, "/reactors/\(unknown)\(suffix)", body: body, headers: Self.bob)
            #expect(theirs.status == 404, "\(method) \(suffix): \(theirs.status) \(theirs.text)")
            #expect(nobodys.status == 404)
            #expect(theirs.text.replacingOccurrences(of: id, with: unknown) == nobodys.text, "\(method) \(suffix)")
        }
        // Alice's session is as she left it, in memory and in the store.
        let state = try await client.get("/reactors/\(id)", headers: Self.alice)
        #expect(state.json["version"] as? Int == increased.json["version"] as? Int)
        #expect((state.json["state"] as? [String: Any])?["value"] as? Int == 1)
        #expect(try store.load(id: id) == before)
        // An admin reaches it.
        #expect(try await client.get("/reactors/\(id)", headers: Self.root).status == 200)
        #expect(try await client.send("DELETE", "/reactors/\(id)", headers: Self.alice).status == 204)
    }

    @Test func theFactorySeesTheSubjectAndTheSessionStaysItsOwnersAfterARestart() async throws {
        let store = InMemorySessionStore(historyCapacity: 16)
        let subjects = Subjects()
        let first = Self.server(store: store, subjects: subjects)
        try first.start()
        let client = HTTPClient(base: "http://127.0.0.1:\(first.port)")
        let created = try await client.post("/reactors", #"{"type":"counter"}"#, headers: Self.alice)
        let id = try #require(created.json["id"] as? String)
        #expect(subjects.seen.withLock { $0.last } == "alice")
        #expect(try store.load(id: id)?.owner == "alice")
        first.shutdown()

        let second = Self.server(store: store, subjects: subjects)
        try second.start()
        defer { second.shutdown() }
        let again = HTTPClient(base: "http://127.0.0.1:\(second.port)")
        #expect(try await again.get("/reactors/\(id)", headers: Self.bob).status == 404)
        #expect(try await again.get("/reactors/\(id)", headers: Self.alice).status == 200)
        // Brought back through the factory, with the subject it was created by.
        #expect(subjects.seen.withLock { $0.last } == "alice")
    }

    @Test func adminRoutesAreAnAdminsAndHealthStaysOpen() async throws {
        let server = Self.server()
        try server.start()
        defer { server.shutdown() }
        let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
        let id = try await client.create("counter", headers: Self.alice)
        for path in ["/metrics", "/reactors/\(id)/history"] {
            #expect(try await client.get(path).status == 401, "\(path)")
            let forbidden = try await client.get(path, headers: Self.alice)
            #expect(forbidden.status == 403, "\(path)")
            #expect(forbidden.json["type"] as? String == "urn:reactor-server:problem:forbidden")
            #expect(try await client.get(path, headers: Self.root).status == 200, "\(path)")
            #expect(try await client.get(path, headers: ["Authorization": "Bearer scrape-secret"]).status == 200, "\(path)")
        }
        #expect(try await client.get("/healthz").status == 200)
        // The admin token is for operations: it creates no sessions.
        let made = try await client.post("/reactors", #"{"type":"counter"}"#, headers: ["Authorization": "Bearer scrape-secret"])
        #expect(made.status == 403)
        #expect(server.service.instanceCount == 1)
    }

    @Test func aCookieOrTheQueryCarriesTheTokenOnlyWhereEnabled() async throws {
        let server = Self.server { authentication, _ in
            authentication.cookieName = "reactor_token"
            authentication.acceptsQueryToken = true
        }
        try server.start()
        defer { server.shutdown() }
        let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
        let id = try #require(
            try await client.post("/reactors", #"{"type":"counter"}"#, headers: ["Cookie": "theme=dark; reactor_token=token-a"])
                .json["id"] as? String)
        #expect(try await client.get("/reactors/\(id)?access_token=token-a").status == 200)
        #expect(try await client.get("/reactors/\(id)?access_token=token-b").status == 404)
        #expect(try await client.get("/reactors/\(id)", headers: ["Cookie": "reactor_token=\"token-a\""]).status == 200)
        #expect(try await client.get("/reactors/\(id)", headers: ["Cookie": "other=token-a"]).status == 401)
        // The header wins over the cookie.
        let both = ["Cookie": "reactor_token=token-a"].merging(Self.bob) { $1 }
        #expect(try await client.get("/reactors/\(id)", headers: both).status == 404)
        // A token in the header and another in the query: which one counts depends on who reads
        // it, so neither does.
        let twice = try await client.get("/reactors/\(id)?access_token=token-a", headers: Self.bob)
        #expect(twice.status == 400)
        #expect(twice.header("WWW-Authenticate")?.contains(#"error="invalid_request""#) == true)
        // So does a query with two tokens, in either order, even the same one twice (as the
        // server reads them off the connection).
        for query in [
            "access_token=token-a&access_token=token-b", "access_token=token-b&access_token=token-a",
            "access_token=token-a&access_token=token-a",
        ] {
            let repeated = try await client.get("/reactors/\(id)?\(query)")
            #expect(repeated.status == 400, "\(query)")
            #expect(repeated.text.contains("more than one access_token parameter"), "\(query)")
        }
    }

    @Test func aStreamEndsWhenItsCredentialsExpireWithoutSayingTheInstanceEnded() async throws {
        let server = Self.server { _, configuration in configuration.heartbeatInterval = .milliseconds(50) }
        try server.start()
        defer { server.shutdown() }
        let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
        let id = try await client.create("counter", headers: Self.alice)
        let url = "http://127.0.0.1:\(server.port)/reactors/\(id)/events"
        let lasting = try EventStreamClient(url: url, headers: Self.alice)
        let brief = try EventStreamClient(url: url, headers: ["Authorization": "Bearer token-brief"])
        await lasting.wait { $0.count == 1 }
        let ended = await brief.waitForEnd()
        #expect(brief.isFinished)
        #expect(ended.map(\.name) == ["state"], "\(ended.map(\.name))")
        // The stream opened with lasting credentials goes on.
        #expect(try await client.post("/reactors/\(id)/actions", #""increase""#, headers: Self.alice).status == 202)
        let later = await lasting.wait { $0.count >= 2 }
        #expect(later.count >= 2)
        #expect(!lasting.isFinished)
        lasting.stop()
    }

    @Test func twoAuthorizationHeadersAreRefusedWhicheverComesFirst() async throws {
        let server = Self.server()
        try server.start()
        defer { server.shutdown() }
        let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
        let id = try await client.create("counter", headers: Self.alice)
        for pair in [("token-a", "token-b"), ("token-b", "token-a"), ("token-a", "token-a")] {
            let connection = try #require(RawConnection(port: server.port))
            #expect(
                connection.send(
                    "GET /reactors/\(id) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(pair.0)\r\nAuthorization: Bearer \(pair.1)\r\nConnection: close\r\n\r\n"
                ))
            let reply = connection.receiveAll()
            #expect(reply.hasPrefix("HTTP/1.1 400"), "\(pair): \(reply.prefix(80))")
            #expect(reply.contains("more than one Authorization header"))
            #expect(reply.contains(#"error="invalid_request""#))
        }
    }

    @Test func subjectsUnicodeCallsEquivalentAreDifferentOwnersAndAControlCharacterIsRefused() async throws {
        for store in [nil, InMemorySessionStore(historyCapacity: 4)] as [InMemorySessionStore?] {
            let server = Self.server(store: store) { authentication, configuration in
                authentication.adminSubjects = ["ro\u{1E6B}"]  // "roṫ", one scalar
                configuration.maxInstancesPerSubject = 1
            }
            try server.start()
            defer { server.shutdown() }
            let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
            for (owner, other) in [("token-cafe", "token-cafe-combining"), ("token-kelly", "token-kelvin")] {
                let id = try await client.create("counter", headers: ["Authorization": "Bearer \(owner)"])
                let theirs = ["Authorization": "Bearer \(other)"]
                #expect(try await client.get("/reactors/\(id)", headers: theirs).status == 404, "\(other)")
                #expect(try await client.post("/reactors/\(id)/actions", #""increase""#, headers: theirs).status == 404)
                #expect(try await client.send("DELETE", "/reactors/\(id)", headers: theirs).status == 404)
                // Its own limit of one, not the other's.
                #expect(try await client.post("/reactors", #"{"type":"counter"}"#, headers: theirs).status == 201, "\(other)")
                #expect(try await client.get("/reactors/\(id)", headers: ["Authorization": "Bearer \(owner)"]).status == 200)
            }
            // "roṫ" as "t" and a combining dot is not the admin "roṫ".
            #expect(try await client.get("/metrics", headers: ["Authorization": "Bearer token-root-combining"]).status == 403)
            let nul = try await client.post("/reactors", #"{"type":"counter"}"#, headers: ["Authorization": "Bearer token-bob-nul"])
            #expect(nul.status == 401)
            #expect((nul.json["detail"] as? String)?.contains("control character") == true, "\(nul.text)")
            #expect(server.service.instanceCount == 4)
        }
    }

    @Test func aSubjectPastItsLimitIs429AndOthersAreNot() async throws {
        for store in [nil, InMemorySessionStore(historyCapacity: 4)] as [InMemorySessionStore?] {
            let server = Self.server(store: store) { _, configuration in configuration.maxInstancesPerSubject = 2 }
            try server.start()
            defer { server.shutdown() }
            let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
            var ids: [String] = []
            for _ in 0..<2 {
                let reply = try await client.post("/reactors", #"{"type":"counter"}"#, headers: Self.alice)
                #expect(reply.status == 201)
                ids.append(try #require(reply.json["id"] as? String))
            }
            let refused = try await client.post("/reactors", #"{"type":"counter"}"#, headers: Self.alice)
            #expect(refused.status == 429)
            #expect(refused.json["type"] as? String == "urn:reactor-server:problem:too-many-instances-for-subject")
            #expect(refused.header("Retry-After") != nil)
            #expect(try await client.post("/reactors", #"{"type":"counter"}"#, headers: Self.bob).status == 201)
            #expect(try await client.send("DELETE", "/reactors/\(ids[0])", headers: Self.alice).status == 204)
            #expect(try await client.post("/reactors", #"{"type":"counter"}"#, headers: Self.alice).status == 201)
            #expect(server.service.instanceCount == 3)
        }
    }
}
