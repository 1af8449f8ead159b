import Foundation
import Locking
import TestSupport
import Testing

@testable import MicroHTTP

@Suite struct ServerTests {
    private static func router() -> Router {
        var router = Router()
        router.add(.GET, "/hello") { _ in .text("hello") }
        router.add(.POST, "/echo") { request in HTTPResponse(status: 200, body: request.body) }
        router.add(.GET, "/query") { request in
            let pairs = request.query.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            return .text(pairs.joined(separator: "|"))
        }
        router.add(.GET, "/items/{id}") { request in .text("item:\(request.pathParameters["id"] ?? "")") }
        router.add(.DELETE, "/items/{id}") { _ in HTTPResponse(status: 204) }
        router.add(.GET, "/header") { request in .text(request.headers["x-test-header"] ?? "none") }
        return router
    }

    @Test func portZeroBindsEphemeralPort() throws {
        let server = try startServer(router: Self.router())
        defer { server.shutdown() }
        #expect(server.port != 0)
    }

    @Test func keepAliveReusesOneConnection() async throws {
        let server = try startServer(router: Self.router())
        defer { server.shutdown() }
        let url = "http://127.0.0.1:\(server.port)/hello"
        let result = try await Clients.curl(
            ["-w", "%{http_code} %{num_connects}\\n"] + Array(repeating: ["-o", "/dev/null", url], count: 50).flatMap { $0 })
        let lines = result.output.split(separator: "\n")
        #expect(lines.count == 50)
        #expect(lines.allSatisfy { $0.hasPrefix("200 ") })
        let connects = lines.compactMap { Int($0.split(separator: " ")[1]) }.reduce(0, +)
        #expect(connects == 1)
    }

    @Test func bodyOverLimitByContentLengthIs413() async throws {
        let server = try startServer({ $0.maxBodySize = 1024 }, router: Self.router())
        defer { server.shutdown() }
        let big = String(repeating: "x", count: 4096)
        let result = try await Clients.curl([
            "-o", "/dev/null", "-w", "%{http_code}", "--data-binary", big, "http://127.0.0.1:\(server.port)/echo",
        ])
        #expect(result.output == "413")
        let small = try await Clients.curl(["--data-binary", "abc", "http://127.0.0.1:\(server.port)/echo"])
        #expect(small.output == "abc")
    }

    @Test func chunkedBodyOverLimitIs413AfterDraining() async throws {
        let server = try startServer({ $0.maxBodySize = 1024 }, router: Self.router())
        defer { server.shutdown() }
        let big = String(repeating: "y", count: 64 * 1024)
        let result = try await Clients.curl([
            "-o", "/dev/null", "-w", "%{http_code}", "-H", "Transfer-Encoding: chunked",
            "--data-binary", big, "http://127.0.0.1:\(server.port)/echo",
        ])
        #expect(result.output == "413")
        let fits = try await Clients.curl([
            "-H", "Transfer-Encoding: chunked", "--data-binary", "chunked ok", "http://127.0.0.1:\(server.port)/echo",
        ])
        #expect(fits.output == "chunked ok")
    }

    /// An error builder whose answers the tests can tell from the server's own.
    private static let customErrorResponse: @Sendable (Int, String) -> HTTPResponse = { status, detail in
        .text("custom \(status): \(detail)", status: status)
    }

    @Test func errorResponseBuilderIsUsed() async throws {
        let server = try startServer(
            {
                $0.maxBodySize = 10
                $0.errorResponse = Self.customErrorResponse
            }, router: Self.router())
        defer { server.shutdown() }
        let result = try await Clients.curl(["--data-binary", String(repeating: "z", count: 100), "http://127.0.0.1:\(server.port)/echo"])
        #expect(result.output == "custom 413: Request body too large")
    }

    @Test func errorResponseBuilderAnswersForLibmicrohttpdsOwnRefusals() async throws {
        let server = try startServer(
            {
                $0.maxHeaderSize = 2048
                $0.errorResponse = Self.customErrorResponse
            }, router: Self.router())
        defer { server.shutdown() }
        let base = "http://127.0.0.1:\(server.port)"
        // Far beyond the connection's memory: libmicrohttpd refuses it before any handler runs.
        let huge = try await Clients.curl(["-H", "X-Big: \(String(repeating: "b", count: 40_000))", "\(base)/hello"])
        #expect(huge.output == "custom 431: Your HTTP header was too big for the memory constraints of this webserver.")
    }

    /// libmicrohttpd 0.9.75 answers a Content-Length it cannot read with its response head sent
    /// twice; the server refuses such a request itself, with one whole answer, and closes.
    @Test(arguments: [
        ("abc", 400), ("-5", 400), ("5, 5", 400), ("", 400), ("+5", 400), ("99999999999999999999999", 413),
    ])
    func aContentLengthThatIsNotANumberGetsOneAnswer(value: String, status: Int) async throws {
        let server = try startServer({ $0.errorResponse = Self.customErrorResponse }, router: Self.router())
        defer { server.shutdown() }
        let raw = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(value)\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
        let result = try await Clients.exchange(raw, port: server.port)
        let statusLines = result.output.split(separator: "\r\n").filter { $0.hasPrefix("HTTP/1.1 ") }
        #expect(statusLines.count == 1, "\(result.output)")
        #expect(result.output.hasPrefix("HTTP/1.1 \(status) "))
        let detail =
            status == 413 ? "Request body too large" : "Content-Length must be the body's length in bytes, in decimal digits only"
        #expect(result.output.hasSuffix("custom \(status): \(detail)"))
        #expect(result.output.lowercased().contains("connection: close"))
    }

    /// Obsolete line folding: libmicrohttpd 0.9.75 would add the folded text to the header's name;
    /// the request is refused instead (RFC 9112 §5.2), and lines that only space their values
    /// oddly are not.
    @Test func aFoldedHeaderLineIsRefused() async throws {
        let server = try startServer({ $0.errorResponse = Self.customErrorResponse }, router: Self.router())
        defer { server.shutdown() }
        let base = "http://127.0.0.1:\(server.port)"
        for fold in [" b", "\tb", "  b c"] {
            let raw = "GET /header HTTP/1.1\r\nHost: x\r\nX-Test-Header: a\r\n\(fold)\r\nConnection: close\r\n\r\n"
            let result = try await Clients.exchange(raw, port: server.port)
            #expect(result.output.hasPrefix("HTTP/1.1 400 "), "\(fold): \(result.output)")
            #expect(
                result.output.hasSuffix(
                    "custom 400: A header line may not start with a space or a tab (obsolete line folding, RFC 9112 §5.2)"))
        }
        let spaced = try await Clients.curl(["-H", "X-Test-Header:  \t yes", "-H", "X-Empty;", "\(base)/header"])
        #expect(spaced.output == "yes")
    }

    @Test func headersOverLimitAre431() async throws {
        let server = try startServer({ $0.maxHeaderSize = 2048 }, router: Self.router())
        defer { server.shutdown() }
        let port = server.port
        let big = try await Clients.curl([
            "-o", "/dev/null", "-w", "%{http_code}", "-H", "X-Big: \(String(repeating: "b", count: 3000))",
            "http://127.0.0.1:\(port)/hello",
        ])
        #expect(big.output == "431")
        let huge = try await Clients.curl([
            "-o", "/dev/null", "-w", "%{http_code}", "-H", "X-Big: \(String(repeating: "b", count: 40_000))",
            "http://127.0.0.1:\(port)/hello",
        ])
        #expect(huge.output == "431")
        let fine = try await Clients.curl(["-H", "X-Test-Header: yes", "http://127.0.0.1:\(port)/header"])
        #expect(fine.output == "yes")
    }

    @Test func notFoundAndMethodNotAllowedWithAllow() async throws {
        let server = try startServer(router: Self.router())
        defer { server.shutdown() }
        let base = "http://127.0.0.1:\(server.port)"
        let missing = try await Clients.curl(["-o", "/dev/null", "-w", "%{http_code}", "\(base)/missing"])
        #expect(missing.output == "404")
        let wrong = try await Clients.curl(["-i", "-X", "PUT", "\(base)/items/7"])
        #expect(wrong.output.hasPrefix("HTTP/1.1 405"))
        #expect(wrong.output.lowercased().contains("allow: get, delete, head"))
        let item = try await Clients.curl(["\(base)/items/a%2Fb%20c"])
        #expect(item.output == "item:a/b c")
    }

    /// A request target in absolute form is served as its path (RFC 9112 §3.2.2: a server must
    /// accept it), query included; any authority, as the Host header, routes nowhere else.
    @Test func anAbsoluteFormTargetIsServedAsItsPath() async throws {
        let server = try startServer(router: Self.router())
        defer { server.shutdown() }
        let base = "http://127.0.0.1:\(server.port)"
        for (target, expected) in [
            ("http://example.com/items/7", "item:7"), ("HTTPS://example.com:8443/query?b=2&a=1", "a=1|b=2"),
            ("/hello", "hello"),
        ] {
            let result = try await Clients.curl(["--request-target", target, "\(base)/ignored"])
            #expect(result.output == expected, "\(target)")
        }
        let bare = try await Clients.curl(["-o", "/dev/null", "-w", "%{http_code}", "--request-target", "http://example.com", base])
        #expect(bare.output == "404")
    }

    @Test func headIsServedByGetWithoutBody() async throws {
        let server = try startServer(router: Self.router())
        defer { server.shutdown() }
        let result = try await Clients.curl(["-I", "http://127.0.0.1:\(server.port)/hello"])
        #expect(result.output.hasPrefix("HTTP/1.1 200"))
        #expect(result.output.lowercased().contains("content-length: 5"))
        #expect(!result.output.contains("hello"))
    }

    @Test func queryIsPercentDecoded() async throws {
        let server = try startServer(router: Self.router())
        defer { server.shutdown() }
        let result = try await Clients.curl(["http://127.0.0.1:\(server.port)/query?q=a+b%2Bc&bad=%zz&e=%E2%82%AC&flag&d=1&d=2"])
        #expect(result.output == "bad=%zz|d=2|e=€|flag=|q=a b+c")
    }

    @Test func concurrentClients() async throws {
        let server = try startServer(router: Self.router())
        defer { server.shutdown() }
        let result = try await Clients.python("concurrent", port: server.port, ["16", "100"])
        #expect(result.termination == .exited(0))
        #expect(result.json["ok"] as? Int == 1600)
    }

    @Test func twoHundredConnectionsAtOnceDoNotStall() async throws {
        let server = try startServer(router: Self.router())
        defer { server.shutdown() }
        let result = try await Clients.python("burst", port: server.port, ["200", "20"], timeout: .seconds(40))
        #expect(result.termination == .exited(0))
        #expect(result.json["ok"] as? Int == 4000)
    }

    @Test func idleKeepAliveConnectionsAreAnsweredWhenTheySpeakAgain() async throws {
        let server = try startServer(router: Self.router())
        defer { server.shutdown() }
        let result = try await Clients.python("idle-then-speak", port: server.port, ["300"], timeout: .seconds(40))
        #expect(result.termination == .exited(0))
        #expect(result.json["first"] as? Int == 300)
        #expect(result.json["second"] as? Int == 300)
    }

    @Test func aPortInUseFailsToStartAndTheServerHoldingItKeepsServing() async throws {
        let first = try startServer(router: Self.router())
        defer { first.shutdown() }
        var configuration = HTTPServerConfiguration()
        configuration.port = first.port
        configuration.threads = 2
        let second = HTTPServer(configuration: configuration, router: Self.router())
        #expect(throws: HTTPServerError.startFailed(host: "127.0.0.1", port: first.port)) { try second.start() }
        #expect(second.port == 0)
        let result = try await Clients.curl(["-sS", "http://127.0.0.1:\(first.port)/hello"])
        #expect(result.output == "hello")
    }

    @Test func aServerAtItsConnectionLimitAcceptsAgainOnceAConnectionCloses() async throws {
        let server = try startServer(
            {
                $0.connectionLimit = 1
                $0.threads = 4
            }, router: Self.router())
        defer { server.shutdown() }
        for _ in 0..<3 {
            let result = try await Clients.curl(["-sS", "http://127.0.0.1:\(server.port)/hello"])
            #expect(result.output == "hello")
        }
    }

    @Test func libmicrohttpdsOwnMessagesReachTheHandlerALineEach() async throws {
        let messages = Locked<[String]>([])
        let reported = EventCounter()
        let server = try startServer(
            {
                $0.libraryMessageHandler = { message in
                    messages.withLock { $0.append(message) }
                    reported.signal()
                }
            }, router: Self.router())
        defer { server.shutdown() }
        // A header line without a colon: libmicrohttpd answers 400 itself, and says why.
        let connection = try #require(RawConnection(port: server.port))
        #expect(connection.send("GET /hello HTTP/1.1\r\nHost: x\r\nbroken\r\n\r\n"))
        let answer = await onAThreadOfItsOwn { connection.receiveAll() }
        #expect(answer.hasPrefix("HTTP/1.1 400"), "\(answer)")
        #expect(await reported.wait(for: 1))
        let logged = messages.withLock { $0 }
        #expect(logged.contains { $0.hasPrefix("Error processing request (HTTP response code is 400") }, "\(logged)")
        #expect(logged.allSatisfy { !$0.isEmpty && !$0.contains("\n") }, "\(logged)")
    }

    /// Requests whose body's end two HTTP parsers could see differently (RFC 9112 §6.1–6.3), or an
    /// HTTP/1.1 request without exactly one Host (§3.2): answered before any handler runs, the
    /// connection then closed, so nothing after the headers is read as a request of its own. Each
    /// body here ends, by one reading of its headers, before a second request to `/hello`.
    @Test(arguments: [
        ("Content-Length: 3\r\nContent-Length: 10", "5\r\nhello\r\n0\r\n\r\n", 400, "more than once"),
        ("Content-Length: 10\r\nTransfer-Encoding: chunked", "0\r\n\r\n", 400, "both given"),
        ("Transfer-Encoding: chunked, gzip", "0\r\n\r\n", 400, "must end with chunked"),
        ("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked", "0\r\n\r\n", 400, "applied once"),
        ("Transfer-Encoding: identity", "", 400, "must end with chunked"),
        ("Transfer-Encoding: gzip, chunked", "0\r\n\r\n", 501, "not supported"),
        ("Host: y\r\nContent-Length: 0", "", 400, "exactly one Host"),
        ("Transfer-Encoding : chunked\r\nContent-Length: 5", "0\r\n\r\n", 400, "its colon"),
    ])
    func aRequestWhoseFramingIsAmbiguousIsRefusedBeforeAnyHandlerAndItsConnectionClosed(
        headers: String, body: String, status: Int, detail: String
    ) async throws {
        let handled = Locked(0)
        let server = try startServer { request in
            handled.withLock { $0 += 1 }
            return .text("handled \(request.path)")
        }
        defer { server.shutdown() }
        let connection = try #require(RawConnection(port: server.port))
        let smuggled = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
        #expect(connection.send("POST /echo HTTP/1.1\r\nHost: x\r\n\(headers)\r\n\r\n\(body)\(smuggled)"))
        let answer = await onAThreadOfItsOwn { connection.receiveAll() }
        #expect(answer.hasPrefix("HTTP/1.1 \(status) "), "\(answer)")
        #expect(answer.contains("\r\nConnection: close\r\n"), "\(answer)")
        #expect(answer.contains(detail), "\(answer)")
        #expect(!answer.contains("handled"), "one answer only: \(answer)")
        #expect(handled.withLock { $0 } == 0)
    }

    @Test func anHTTP11RequestWithoutHostIsRefusedAndAnHTTP10OneServed() async throws {
        let server = try startServer(router: Self.router())
        defer { server.shutdown() }
        let withoutHost = try #require(RawConnection(port: server.port))
        #expect(withoutHost.send("GET /hello HTTP/1.1\r\n\r\n"))
        let refused = await onAThreadOfItsOwn { withoutHost.receiveAll() }
        #expect(refused.hasPrefix("HTTP/1.1 400 ") && refused.contains("exactly one Host"), "\(refused)")
        // HTTP/1.0 may leave Host out.
        let old = try #require(RawConnection(port: server.port))
        #expect(old.send("GET /hello HTTP/1.0\r\n\r\n"))
        let served = await onAThreadOfItsOwn { old.receiveAll() }
        #expect(served.hasPrefix("HTTP/1.1 200 ") && served.hasSuffix("hello"), "\(served)")
    }

    @Test func servesIPv6Loopback() async throws {
        let server = try startServer({ $0.host = "::1" }, router: Self.router())
        defer { server.shutdown() }
        let result = try await Clients.curl(["-sS", "-g", "http://[::1]:\(server.port)/hello"])
        #expect(result.output == "hello")
    }

    @Test func aHostNameIsResolvedToItsIPv4Address() async throws {
        let server = try startServer({ $0.host = "localhost" }, router: Self.router())
        defer { server.shutdown() }
        let result = try await Clients.curl(["-sS", "http://127.0.0.1:\(server.port)/hello"])
        #expect(result.output == "hello")
    }

    @Test func aHostThatDoesNotResolveIsRefused() {
        var configuration = HTTPServerConfiguration()
        configuration.host = "no-such-host.invalid"
        let server = HTTPServer(configuration: configuration, router: Self.router())
        #expect(throws: HTTPServerError.invalidHost("no-such-host.invalid")) { try server.start() }
    }

    @Test func deferredResponseFromAnotherThread() async throws {
        let server = try startServer { request in
            .deferred { responder in
                Thread.detachNewThread { responder.respond(.text("later \(request.path)")) }
            }
        }
        defer { server.shutdown() }
        let url = "http://127.0.0.1:\(server.port)/x"
        let result = try await Clients.curl(["-w", " %{num_connects}\\n"] + Array(repeating: url, count: 20))
        let lines = result.output.split(separator: "\n")
        #expect(lines.count == 20)
        #expect(lines.allSatisfy { $0.hasPrefix("later /x") })
        #expect(lines.compactMap { Int($0.split(separator: " ").last!) }.reduce(0, +) == 1)
    }

    @Test func deferredResponsesFromOtherThreadsUnderConcurrentLoadAreAllDelivered() async throws {
        // Every answer resumes its connection from another thread and must wake that connection's
        // loop; one wake-up lost leaves a client waiting until its 20 s timeout.
        let server = try startServer { request in
            .deferred { responder in
                Thread.detachNewThread { responder.respond(HTTPResponse(status: 200, body: request.body)) }
            }
        }
        defer { server.shutdown() }
        let result = try await Clients.python("concurrent", port: server.port, ["16", "300"], timeout: .seconds(60))
        #expect(result.termination == .exited(0))
        #expect(result.json["ok"] as? Int == 4800)
    }

    @Test func deferredResponseAnsweredInsideStart() async throws {
        let server = try startServer { _ in .deferred { $0.respond(.text("now")) } }
        defer { server.shutdown() }
        let url = "http://127.0.0.1:\(server.port)/"
        let result = try await Clients.curl(Array(repeating: url, count: 10))
        #expect(result.output == String(repeating: "now", count: 10))
    }

    @Test func aDeferredReplyHeldPastItsHoldIsSuspendedThenDelivered() async throws {
        let responders = Locked<[HTTPResponder]>([])
        let started = EventCounter()
        let server = try startServer({ $0.deferredReplyHold = .milliseconds(1) }) { _ in
            .deferred { responder in
                responders.withLock { $0.append(responder) }
                started.signal()
            }
        }
        defer { server.shutdown() }
        async let client = Clients.curl(["http://127.0.0.1:\(server.port)/late"])
        #expect(await started.wait(for: 1))
        // Held from the start, then suspended once the hold is over (the loop runs each
        // millisecond while a reply is held): nothing held any more, and the reply still to come.
        #expect(await eventually { server.heldReplies == 0 })
        responders.withLock { $0 }.first?.respond(.text("late"))
        #expect(try await client.output == "late")
    }

    @Test func aReplyHeldForAClientThatLeftEndsItsRequest() async throws {
        let responders = Locked<[HTTPResponder]>([])
        let started = EventCounter()
        let server = try startServer({ $0.deferredReplyHold = .seconds(600) }) { request in
            if request.path == "/now" { return .text("now") }
            return .deferred { responder in
                responders.withLock { $0.append(responder) }
                started.signal()
            }
        }
        defer { server.shutdown() }
        do {
            let connection = try #require(RawConnection(port: server.port))
            #expect(connection.send("GET /held HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
            #expect(await started.wait(for: 1))
            #expect(server.heldReplies == 1)
        }  // the connection closes here
        // libmicrohttpd reads nothing more from a connection once its request is whole, so the
        // leaving is seen when the reply is written: the request then ends, nothing is held, and
        // the server goes on serving.
        #expect(server.inFlightRequests == 1)
        responders.withLock { $0 }.first?.respond(.text("too late"))
        #expect(await eventually { server.inFlightRequests == 0 && server.heldReplies == 0 })
        #expect(try await Clients.curl(["http://127.0.0.1:\(server.port)/now"]).output == "now")
    }

    @Test func asyncResponseFromTask() async throws {
        let server = try startServer { request in
            .async {
                await Task.yield()
                return HTTPResponse(status: 201, headers: ["X-Async": "1"], body: request.body)
            }
        }
        defer { server.shutdown() }
        // The handler's task runs on this test process's concurrency pool, which every test
        // shares: under ThreadSanitizer on 2 cores it once waited its turn for more than 20 s.
        let result = try await Clients.curl(
            ["-i", "--data-binary", "payload", "http://127.0.0.1:\(server.port)/a"], maxTime: 110, timeout: .seconds(120))
        #expect(result.termination == .exited(0))
        #expect(result.output.hasPrefix("HTTP/1.1 201"))
        #expect(result.output.contains("X-Async: 1"))
        #expect(result.output.hasSuffix("payload"))
    }

    @Test func malformedRequestsDoNotCrash() async throws {
        let server = try startServer(router: Self.router())
        defer { server.shutdown() }
        let port = server.port
        for raw in [
            "GARBAGE\r\n\r\n", "GET /%zz%% HTTP/1.1\r\nHost: x\r\n\r\n", "GET / HTTP/9.9\r\n\r\n",
            "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
            "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        ] {
            _ = try await Clients.run(
                "/usr/bin/python3",
                [
                    "-c",
                    """
                    import socket; s = socket.create_connection(("127.0.0.1", \(port)), timeout=5)
                    s.sendall(bytes(\(Array(raw.utf8))))
                    try: s.recv(4096)
                    except Exception: pass
                    """,
                ])
        }
        let after = try await Clients.curl(["http://127.0.0.1:\(port)/hello"])
        #expect(after.output == "hello")
    }

    @Test func aPreparedResponseIsSharedFromItsSecondSendAndChangedCopiesCarryTheirChanges() async throws {
        let prepared = PreparedResponse(
            status: 203, headers: ["Content-Type": "application/json", "X-Prepared": "yes"],
            body: Array(#"{"shared":true}"#.utf8))
        let sentOnce = PreparedResponse(status: 200, headers: [:], body: Array("once".utf8))
        var router = Router()
        router.add(.GET, "/prepared") { _ in HTTPResponse(prepared) }
        router.add(.GET, "/once") { _ in HTTPResponse(sentOnce) }
        router.add(.GET, "/changed") { _ in
            var response = HTTPResponse(prepared)
            response.headers.add("X-Changed", "1")
            return response
        }
        let server = try startServer(router: router)
        defer { server.shutdown() }
        let base = "http://127.0.0.1:\(server.port)"
        // Two clients at once, 40 requests each over keep-alive connections, all sharing one copy.
        async let first = Clients.curl(["-s", "-i"] + Array(repeating: "\(base)/prepared", count: 40))
        async let second = Clients.curl(["-s", "-i"] + Array(repeating: "\(base)/prepared", count: 40))
        for result in try await [first, second] {
            let replies = result.output.components(separatedBy: "HTTP/1.1 ").dropFirst()
            #expect(replies.count == 40)
            for reply in replies {
                #expect(reply.hasPrefix("203"))
                #expect(reply.contains("X-Prepared: yes"))
                #expect(reply.contains("Content-Length: 15"))
                #expect(reply.hasSuffix(#"{"shared":true}"#))
            }
        }
        #expect(prepared.isShared)
        // A response sent once is sent as an ordinary one: no shared copy is kept for it.
        #expect(try await Clients.curl(["-s", "\(base)/once"]).output == "once")
        #expect(!sentOnce.isShared)
        let head = try await Clients.curl(["-s", "-I", "\(base)/prepared"])
        #expect(head.output.hasPrefix("HTTP/1.1 203"))
        #expect(head.output.contains("Content-Length: 15"))
        #expect(!head.output.contains("shared"))
        let changed = try await Clients.curl(["-s", "-i", "\(base)/changed"])
        #expect(changed.output.hasPrefix("HTTP/1.1 203"))
        #expect(changed.output.contains("X-Prepared: yes"))
        #expect(changed.output.contains("X-Changed: 1"))
        #expect(changed.output.hasSuffix(#"{"shared":true}"#))
    }
}
