import Foundation
import ReactorExamples
import ReactorHTTP
import ReactorHosting
import Testing

/// `?wait=true` answers `200` only for an action that finished.
@Suite struct WaitForActionTests {
    @Test func aWaitForAnActionItsInstancesDeletionCutOffAnswers404NotTheStateBeforeIt() async throws {
        var registry = ReactorRegistry()
        // The value changes 60 s after the action: long after the deletion below.
        registry.register("counter", exampleActions: CounterReactor.exampleActions) { CounterReactor(delay: .seconds(60)) }
        let server = inProcessServer(registry: registry)
        try server.start()
        defer { server.shutdown() }
        let base = "http://127.0.0.1:\(server.port)"
        let client = HTTPClient(base: base)
        let id = try await client.create("counter")
        let stream = try EventStreamClient(url: "\(base)/reactors/\(id)/events")
        defer { stream.stop() }
        async let waited = client.post("/reactors/\(id)/actions?wait=true", #""increase""#)
        // Started: the first of its states (loading) is published.
        let started = await stream.wait { $0.last?.json["isLoading"] as? Bool == true }
        #expect(started.last?.json["isLoading"] as? Bool == true)
        #expect(try await client.send("DELETE", "/reactors/\(id)").status == 204)

        let reply = try await waited
        #expect(reply.status == 404, "\(reply.status) \(reply.text)")
        #expect(reply.header("Content-Type") == "application/problem+json")
        #expect(reply.json["type"] as? String == "urn:reactor-server:problem:unknown-instance", "\(reply.text)")
        #expect((reply.json["detail"] as? String)?.contains("deleted before the action finished") == true, "\(reply.text)")
    }
}
