import Foundation
import Logging
import MicroHTTP
import ReactorExamples
import ReactorHTTP
import ReactorHosting
import ServiceLifecycle
import Testing

/// ReactorServer as a swift-service-lifecycle `Service`: an app runs it in a `ServiceGroup`
/// and writes no signal handling of its own.
@Suite struct ServiceLifecycleTests {
    private static func server() -> ReactorServer { inProcessCounterServer() }

    @Test func aGracefulShutdownOfTheGroupStopsTheServer() async throws {
        let server = Self.server()
        // Started first, so the test knows when it listens; the group's run then serves it.
        try server.start()
        let port = server.port
        let group = ServiceGroup(services: [server], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        let client = HTTPClient(base: "http://127.0.0.1:\(port)")
        let id = try await client.create("counter")
        #expect(try await client.post("/reactors/\(id)/actions?wait=true", #""increase""#).status == 200)
        let stream = try EventStreamClient(url: "http://127.0.0.1:\(port)/reactors/\(id)/events")
        await stream.wait { !$0.isEmpty }

        await group.triggerGracefulShutdown()
        try await running.value
        // The stream ended with the shutdown reason, and the port no longer answers.
        let events = await stream.waitForEnd()
        #expect(events.last?.name == "end")
        #expect(events.last?.json["reason"] as? String == "shutdown")
        await #expect(throws: (any Error).self) { try await client.get("/healthz") }
    }

    @Test func theGroupStartsAServerNotYetStarted() async throws {
        let server = Self.server()
        let group = ServiceGroup(services: [server], logger: Logger(label: "test"))
        // Asked to stop before it runs: the group still starts the server, then stops it.
        await group.triggerGracefulShutdown()
        try await group.run()
        #expect(server.port == 0)
        // A stopped server is not started again by another run.
        try await server.run()
        #expect(server.port == 0)
    }
}
