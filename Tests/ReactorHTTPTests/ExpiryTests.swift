import Foundation
import MicroHTTP
import ReactorExamples
import ReactorHosting
import Synchronization
import Testing

@testable import ReactorHTTP

/// Idle expiry with injected time: a real server in this process, its clock moved by the test.
@Suite struct ExpiryTests {
    /// Monotonic nanoseconds that only the test moves.
    final class ManualTime: Sendable {
        private let nanoseconds = Atomic<UInt64>(1_000_000_000)
        func now() -> UInt64 { nanoseconds.load(ordering: .relaxed) }
        func advance(by duration: Duration) { nanoseconds.wrappingAdd(duration.nanoseconds, ordering: .relaxed) }
    }

    func makeServer(time: ManualTime) throws -> ReactorServer {
        var registry = ReactorRegistry()
        registry.register("counter", exampleActions: CounterReactor.exampleActions) {
            CounterReactor(delay: .zero)
        }
        var configuration = ReactorServiceConfiguration()
        configuration.idleTimeout = .seconds(60)
        configuration.now = { time.now() }
        let server = ReactorServer(registry: registry, configuration: configuration)
        try server.start()
        return server
    }

    /// A counter on `server` with one event stream that has received its first state.
    func counterWithStream(on server: ReactorServer) async throws
        -> (client: HTTPClient, id: String, stream: EventStreamClient)
    {
        let base = "http://127.0.0.1:\(server.port)"
        let client = HTTPClient(base: base)
        let id = try await client.create("counter")
        let stream = try EventStreamClient(url: "\(base)/reactors/\(id)/events")
        await stream.wait { !$0.isEmpty }
        return (client, id, stream)
    }

    @Test func anIdleInstanceExpiresAndAnActiveOneDoesNot() async throws {
        let time = ManualTime()
        let server = try makeServer(time: time)
        defer { server.shutdown() }
        let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
        let idle = try await client.create("counter")
        let active = try await client.create("counter")

        time.advance(by: .seconds(45))
        _ = try await client.post("/reactors/\(active)/actions", #""increase""#)
        time.advance(by: .seconds(30))

        #expect(server.service.expireIdleInstances() == 1)
        #expect(try await client.get("/reactors/\(idle)").status == 404)
        #expect(try await client.get("/reactors/\(active)").status == 200)
    }

    @Test func anOpenStreamKeepsAnInstanceAliveAndExpiryEndsIt() async throws {
        let time = ManualTime()
        let server = try makeServer(time: time)
        defer { server.shutdown() }
        let (client, id, stream) = try await counterWithStream(on: server)

        time.advance(by: .seconds(3600))
        #expect(server.service.expireIdleInstances() == 0)
        #expect(try await client.get("/reactors/\(id)").status == 200)

        stream.stop()
        // Noticed when the client closes, not at the next heartbeat (15 s by default). The
        // stream's close is reported by the server asynchronously; the instance counts as
        // active from that moment, so it expires only a full timeout later.
        try await waitUntil { server.service.streamCount == 0 }
        #expect(server.service.expireIdleInstances() == 0)
        time.advance(by: .seconds(61))
        #expect(server.service.expireIdleInstances() == 1)
    }

    @Test func expiryEndsOpenStreamsWithAnEndEvent() async throws {
        let time = ManualTime()
        let server = try makeServer(time: time)
        defer { server.shutdown() }
        let (_, id, stream) = try await counterWithStream(on: server)
        let instance = try #require(server.service.table.instance(id))
        // Expire it as the sweeper would once its stream is gone.
        _ = server.service.table.remove(id)
        instance.dispose(.expired)
        let events = await stream.waitForEnd()
        #expect(events.last?.name == "end")
        #expect(events.last?.json["reason"] as? String == "expired")
    }
}

/// Waits for a condition that another thread makes true, re-checking as the scheduler yields;
/// bounded as a failure guard.
func waitUntil(timeout: Duration = .seconds(10), _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        guard ContinuousClock.now < deadline else { throw TestFailure("condition not met in \(timeout)") }
        await Task.yield()
    }
}
