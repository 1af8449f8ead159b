import Foundation
import Locking
import MicroHTTP
import Synchronization
import TestSupport
import Testing

/// Subscribers of an event-stream endpoint, as a service would keep them.
final class Subscribers: Sendable {
    let opened = EventCounter()
    let closed = EventCounter()
    let reasons = Locked<[HTTPStreamCloseReason]>([])
    private let sources = Locked<[HTTPBufferedStreamSource]>([])

    func makeSource(
        capacity: Int = 64, overflow: HTTPBufferedStreamSource.OverflowPolicy = .conflate,
        initial: [[UInt8]] = [], finalBytes: [UInt8] = []
    ) -> HTTPBufferedStreamSource {
        let source = HTTPBufferedStreamSource(capacity: capacity, overflow: overflow, initial: initial, finalBytes: finalBytes) {
            [weak self] reason in
            self?.reasons.withLock { $0.append(reason) }
            self?.closed.signal()
        }
        sources.withLock { $0.append(source) }
        opened.signal()
        return source
    }

    /// Writes one already-encoded message to every open subscriber.
    func broadcast(_ message: String) {
        let bytes = Array(message.utf8)
        for source in sources.withLock({ $0 }) { source.write(bytes) }
    }

    var sourcesSnapshot: [HTTPBufferedStreamSource] { sources.withLock { $0 } }

    /// Forgets every source (tests then check they are freed).
    func releaseAll() { sources.withLock { $0.removeAll() } }
}

private func sseHandler(
    _ subscribers: Subscribers, capacity: Int = 64, heartbeat: HTTPHeartbeat? = nil, finalBytes: [UInt8] = [],
    initial: [[UInt8]] = [Array("data: hello\n\n".utf8)]
) -> HTTPHandler {
    { _ in
        .stream(
            headers: ["Content-Type": "text/event-stream"],
            source: subscribers.makeSource(capacity: capacity, initial: initial, finalBytes: finalBytes),
            heartbeat: heartbeat)
    }
}

@Suite struct StreamTests {
    @Test func sseClientReceivesEveryEventInOrder() async throws {
        let subscribers = Subscribers()
        // Capacity above the burst size: nothing is conflated, so every event must arrive.
        let server = try startServer(handler: sseHandler(subscribers, capacity: 256))
        defer { server.shutdown() }
        async let client = Clients.python("sse", port: server.port, ["/events", "201"])
        #expect(await subscribers.opened.wait(for: 1))
        for index in 1...200 { subscribers.broadcast("id: \(index)\ndata: \(index)\n\n") }
        let result = try await client
        #expect(result.json["status"] as? Int == 200)
        #expect(result.json["chunked"] as? Bool == true)
        #expect(result.json["type"] as? String == "text/event-stream")
        let events = result.json["events"] as? [String] ?? []
        #expect(events == ["hello"] + (1...200).map(String.init))
    }

    @Test func largeChunkIsSentWhole() async throws {
        let big = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 % 251) }
        final class Once: HTTPStreamSource {
            let bytes: [UInt8]
            let sent = Atomic<Bool>(false)
            init(_ bytes: [UInt8]) { self.bytes = bytes }
            func nextChunk(for stream: HTTPStream) -> HTTPStreamChunk {
                sent.exchange(true, ordering: .relaxed) ? .end : .bytes(bytes)
            }
            func streamDidClose(_ stream: HTTPStream, reason: HTTPStreamCloseReason) {}
        }
        let server = try startServer { _ in .stream(headers: [:], source: Once(big)) }
        defer { server.shutdown() }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("microhttp-big-\(server.port)").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        _ = try await Clients.curl(["-o", output, "http://127.0.0.1:\(server.port)/big"])
        #expect(FileManager.default.contents(atPath: output).map(Array.init) == big)
    }

    @Test func aSourceThatAnsweredIdleAsShutdownBeganIsAskedForItsFinalBytes() async throws {
        /// Says hello; on its next turn starts the server's shutdown and answers `.idle` only once
        /// shutdown has begun, as a source that looked at `isShuttingDown` a moment too early;
        /// asked again, it says goodbye and ends.
        final class LastWords: HTTPStreamSource {
            let turns = Atomic<Int>(0)
            let server = Locked<HTTPServer?>(nil)
            func nextChunk(for stream: HTTPStream) -> HTTPStreamChunk {
                switch turns.wrappingAdd(1, ordering: .relaxed).newValue {
                case 1:
                    return .bytes(Array("hello\n".utf8))
                case 2:
                    let server = self.server.withLock { $0 }
                    DispatchQueue.global().async { server?.shutdown() }
                    while !stream.isShuttingDown { sched_yield() }
                    return .idle
                case 3:
                    return .bytes(Array("bye\n".utf8))
                default:
                    return .end
                }
            }
            func streamDidClose(_ stream: HTTPStream, reason: HTTPStreamCloseReason) {}
        }
        let source = LastWords()
        let server = try startServer { _ in .stream(headers: [:], source: source) }
        source.server.withLock { $0 = server }
        defer {
            server.shutdown()
            source.server.withLock { $0 = nil }  // the server's handler holds the source
        }
        let result = try await Clients.curl(["-sS", "http://127.0.0.1:\(server.port)/last-words"])
        #expect(result.output == "hello\nbye\n")
    }

    @Test func thousandIdleStreamsReceiveOneBroadcast() async throws {
        let subscribers = Subscribers()
        let server = try startServer(handler: sseHandler(subscribers, initial: []))
        defer { server.shutdown() }
        async let client = Clients.python("many-streams", port: server.port, ["/events", "1000", "broadcast-1"], timeout: .seconds(90))
        #expect(await subscribers.opened.wait(for: 1000, timeout: .seconds(60)))
        subscribers.broadcast("data: broadcast-1\n\n")
        let result = try await client
        #expect(result.json["opened"] as? Int == 1000)
        #expect(result.json["received"] as? Int == 1000)
    }

    @Test func disconnectedClientIsNoticedAndSourceFreed() async throws {
        let subscribers = Subscribers()
        let heartbeat = HTTPHeartbeat(interval: .milliseconds(50), bytes: Array(": ping\n\n".utf8))
        let server = try startServer(handler: sseHandler(subscribers, heartbeat: heartbeat))
        defer { server.shutdown() }
        let result = try await Clients.python("disconnect", port: server.port, ["/events"])
        #expect(result.termination == .exited(0))
        #expect(await subscribers.opened.wait(for: 1))
        weak let weakSource = subscribers.sourcesSnapshot.first
        subscribers.releaseAll()
        #expect(await subscribers.closed.wait(for: 1, timeout: .seconds(10)))
        #expect(subscribers.reasons.withLock { $0 } == [.clientDisconnected])
        // The stream lets go of its source right after `streamDidClose` returns.
        let released = EventCounter()
        Task.detached {
            while weakSource != nil { await Task.yield() }
            released.signal()
        }
        #expect(await released.wait(for: 1, timeout: .seconds(5)))
    }

    /// With no heartbeat nothing is written to an idle stream, so only the loop's watch on its
    /// suspended connection can notice the client leave; without it the stream would stay open.
    @Test(arguments: ["close", "reset"])
    func clientLeavingAnIdleStreamIsNoticedWithoutAWrite(how: String) async throws {
        let subscribers = Subscribers()
        let server = try startServer(handler: sseHandler(subscribers))
        defer { server.shutdown() }
        let result = try await Clients.python("disconnect", port: server.port, ["/events", how])
        #expect(result.termination == .exited(0))
        #expect(await subscribers.closed.wait(for: 1, timeout: .seconds(10)))
        #expect(subscribers.reasons.withLock { $0 } == [.clientDisconnected])
    }

    @Test func heartbeatIsWrittenWhileIdle() async throws {
        let subscribers = Subscribers()
        let heartbeat = HTTPHeartbeat(interval: .milliseconds(20), bytes: Array(": ping\n\n".utf8))
        let server = try startServer(handler: sseHandler(subscribers, heartbeat: heartbeat))
        defer { server.shutdown() }
        // Waits (up to the client's 20 s socket timeout, a failure guard) for the first event and
        // the heartbeat after it: nothing else is written, so the ping follows the event directly.
        let expected = "data: hello\n\n: ping\n\n"
        let result = try await Clients.python("body-start", port: server.port, ["/events", String(expected.utf8.count)])
        #expect(result.json["body"] as? String == expected)
    }

    /// The heartbeat keeps its time on a thread of its own: with every thread of Swift's
    /// concurrency pool blocked (as a handler's or a reactor's blocking call holds one), an idle
    /// stream still gets its ping. On a timer task, it got none until the pool was free again.
    @Test func heartbeatIsWrittenWhileTheConcurrencyPoolIsBlocked() async throws {
        let heartbeat = HTTPHeartbeat(interval: .milliseconds(20), bytes: Array(": ping\n\n".utf8))
        let server = try startServer(handler: sseHandler(Subscribers(), heartbeat: heartbeat))
        defer { server.shutdown() }
        let port = server.port
        let received = await whileTheConcurrencyPoolIsBlocked {
            receive(port: port, path: "/events", until: ": ping\n\n", seconds: 5)
        }
        let event = try #require(received.range(of: "data: hello\n\n"))
        let ping = try #require(received.range(of: ": ping\n\n"))
        #expect(event.upperBound <= ping.lowerBound)
    }

    @Test func overflowPolicies() {
        let conflating = HTTPBufferedStreamSource(capacity: 2, overflow: .conflate)
        #expect(conflating.write([1]) && conflating.write([2]) && conflating.write([3]))
        #expect(conflating.queuedCount == 1)
        let disconnecting = HTTPBufferedStreamSource(capacity: 2, overflow: .disconnect)
        #expect(disconnecting.write([1]) && disconnecting.write([2]))
        #expect(!disconnecting.write([3]))
        #expect(!disconnecting.write([4]))
        #expect(disconnecting.queuedCount == 0)
    }

    @Test func shutdownEndsOpenStreamsWithFinalBytes() async throws {
        let subscribers = Subscribers()
        let server = try startServer(handler: sseHandler(subscribers, finalBytes: Array("event: bye\ndata: done\n\n".utf8)))
        let port = server.port
        async let first = Clients.python("sse-until-end", port: port, ["/events"])
        async let second = Clients.python("sse-until-end", port: port, ["/events"])
        #expect(await subscribers.opened.wait(for: 2))
        let clock = ContinuousClock()
        let started = clock.now
        server.shutdown()
        #expect(clock.now - started < .seconds(5))
        for result in try await [first, second] {
            #expect(result.termination == .exited(0))
            let events = result.json["events"] as? [[String]] ?? []
            #expect(events == [["message", "hello"], ["bye", "done"]])
        }
        #expect(subscribers.reasons.withLock { $0 } == [.serverShutdown, .serverShutdown])
    }

    @Test func shutdownAnswersPendingDeferredRequests() async throws {
        let started = EventCounter()
        let server = try startServer({ $0.shutdownTimeout = .milliseconds(400) }) { _ in
            .deferred { _ in started.signal() }  // never answers by itself
        }
        async let client = Clients.curl(["-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(server.port)/hang"])
        #expect(await started.wait(for: 1))
        server.shutdown()
        #expect(try await client.output == "503")
    }
}

/// Sends `GET path` on a socket of its own (blocking, no task involved) and returns what arrives,
/// headers and chunk framing included, until `marker` has arrived, the connection ends, or
/// `seconds` pass with nothing new (a failure guard).
private func receive(port: UInt16, path: String, until marker: String, seconds: Int) -> String {
    guard case .success(let socket) = connectToLoopback(port: port) else { return "" }
    defer { close(socket) }
    var timeout = timeval(tv_sec: seconds, tv_usec: 0)
    _ = setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
    guard send(socket, request, request.count, 0) == request.count else { return "" }
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while !String(decoding: received, as: UTF8.self).contains(marker) {
        let count = recv(socket, &buffer, buffer.count, 0)
        guard count > 0 else { break }
        received += buffer[..<count]
    }
    return String(decoding: received, as: UTF8.self)
}
