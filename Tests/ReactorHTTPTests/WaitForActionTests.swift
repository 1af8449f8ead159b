import Foundation
import MicroHTTP
import ReactorExamples
import ReactorHTTP
import ReactorHosting
import TestSupport
import Testing

/// `?wait=true` answers `200` only for an action that finished.
@Suite struct WaitForActionTests {
    @Test func aWaitForAnActionItsInstancesDeletionCutOffAnswers404NotTheStateBeforeIt() async throws {
        // The value changes 60 s after the action: long after the deletion below.
        let waiting = try await WaitingRequest.started(delay: .seconds(60))
        defer { waiting.stop() }
        #expect(try await waiting.client.send("DELETE", "/reactors/\(waiting.id)").status == 204)

        let reply = try await waiting.reply.value
        #expect(reply.status == 404, "\(reply.status) \(reply.text)")
        #expect(reply.header("Content-Type") == "application/problem+json")
        #expect(reply.json["type"] as? String == "urn:reactor-server:problem:unknown-instance", "\(reply.text)")
        #expect((reply.json["detail"] as? String)?.contains("deleted before the action finished") == true, "\(reply.text)")
    }

    /// A stop that waited for a request's action as long as it waits (half of the HTTP server's
    /// `shutdownTimeout`) answers it `202` with the action's sequence number, as a request
    /// without the wait: the action was accepted, so a refusal (the `503` the HTTP server gives
    /// what is pending then, as it was) would have a client that sends it again apply it twice.
    @Test func aStopAnswersARequestWaitingForAnUnfinishedAction202() async throws {
        // The value changes 60 s after the action: long after the stop, which waits 200 ms for
        // pending replies, then cuts the action off 100 ms later.
        let waiting = try await WaitingRequest.started(
            delay: .seconds(60), configure: { $0.stopGrace = .milliseconds(100) },
            http: { $0.shutdownTimeout = .milliseconds(400) })
        defer { waiting.stop() }

        await onAThreadOfItsOwn { waiting.server.shutdown() }
        let reply = try await waiting.reply.value
        #expect(reply.status == 202, "\(reply.status) \(reply.text)")
        #expect(reply.json["seq"] as? Int == 1, "\(reply.text)")
    }

    /// A request whose action finishes while the stop waits for it is answered as usual.
    @Test func aStopLetsARequestWaitingForAnActionThatFinishesMeanwhileHaveTheState() async throws {
        // The stop waits up to 60 s for pending replies: far longer than the action takes, even
        // on a loaded machine (under ThreadSanitizer, with every suite at once on two cores, the
        // action's 300 ms once took longer than the default 5 s).
        let waiting = try await WaitingRequest.started(delay: .milliseconds(300), http: { $0.shutdownTimeout = .seconds(120) })
        defer { waiting.stop() }

        await onAThreadOfItsOwn { waiting.server.shutdown() }
        let reply = try await waiting.reply.value
        #expect(reply.status == 200, "\(reply.status) \(reply.text)")
        #expect((reply.json["state"] as? [String: Any])?["value"] as? Int == 1, "\(reply.text)")
    }
}

/// A started in-process server with one counter whose value changes `delay` after an action, and
/// a `?wait=true` request for `"increase"` whose action has started (its loading state is out).
private struct WaitingRequest {
    let server: ReactorServer
    let client: HTTPClient
    let id: String
    let stream: EventStreamClient
    let reply: Task<Reply, any Error>

    static func started(
        delay: Duration, configure: (inout ReactorServiceConfiguration) -> Void = { _ in },
        http: (inout HTTPServerConfiguration) -> Void = { _ in }
    ) async throws -> WaitingRequest {
        var registry = ReactorRegistry()
        registry.register("counter", exampleActions: CounterReactor.exampleActions) { CounterReactor(delay: delay) }
        let server = inProcessServer(registry: registry, configure: configure, http: http)
        try server.start()
        let base = "http://127.0.0.1:\(server.port)"
        let client = HTTPClient(base: base)
        let id = try await client.create("counter")
        let stream = try EventStreamClient(url: "\(base)/reactors/\(id)/events")
        let reply = Task { try await client.post("/reactors/\(id)/actions?wait=true", #""increase""#) }
        let started = await stream.wait { $0.last?.json["isLoading"] as? Bool == true }
        #expect(started.last?.json["isLoading"] as? Bool == true)
        return WaitingRequest(server: server, client: client, id: id, stream: stream, reply: reply)
    }

    func stop() {
        stream.stop()
        server.shutdown()
    }
}
