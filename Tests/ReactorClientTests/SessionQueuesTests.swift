import Foundation
import ReactorExamples
import Testing

@testable import ReactorClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The client's requests, started off the concurrency pool, against a live reactor-server.
@Suite(.timeLimit(.minutes(1)))
struct SessionQueuesTests {
    /// A request (and the answer) as `URLSession.data(for:)` gives them.
    @Test func aRequestIsAnswered() async throws {
        let server = try await ServerProcess()
        let session = URLSession(configuration: .ephemeral, delegate: nil, delegateQueue: SessionQueues.delegateQueue())
        var request = URLRequest(url: server.url.appendingPathComponent("reactors"))
        request.httpMethod = "POST"
        request.httpBody = Data(#"{"type":"counter"}"#.utf8)
        let (body, response) = try await SessionQueues.data(for: request, on: session)
        #expect((response as? HTTPURLResponse)?.statusCode == 201)
        #expect(String(decoding: body, as: UTF8.self).contains(#""type":"counter""#))
    }

    /// Cancelling the task that waits cancels the request: the counter changes 10 minutes after
    /// the action, and the request waits for that (the server's `?wait=true` budget is as long),
    /// so an uncancelled one would outlast the suite's time limit. (With 5 s, a run under
    /// ThreadSanitizer on 2 cores once took longer than that to cancel, and the request was
    /// answered first; with the default budget of 10 s, it was once answered `202`.)
    @Test func cancellingTheCallerCancelsTheRequest() async throws {
        let server = try await ServerProcess(arguments: ["--counter-delay-ms", "600000", "--wait-timeout-ms", "600000"])
        let counter = try await RemoteReactor<CounterReactor>.create(type: "counter", at: server.url)
        let session = URLSession(configuration: .ephemeral, delegate: nil, delegateQueue: SessionQueues.delegateQueue())
        var request = URLRequest(
            url: server.url.appendingPathComponent("reactors/\(counter.id)/actions").appending(queryItems: [
                URLQueryItem(name: "wait", value: "true")
            ]))
        request.httpMethod = "POST"
        request.httpBody = Data(#""increase""#.utf8)
        let waiting = Task { try await SessionQueues.data(for: request, on: session) }
        // Until the server has the action (its first state shows the counter loading).
        _ = try await counter.states.collect { $0.state.isLoading }
        waiting.cancel()
        await #expect(throws: URLError.self) { _ = try await waiting.value }
    }

    /// A task cancelled before its request starts never sends it.
    @Test func aRequestCancelledBeforeItStartsIsNotSent() async throws {
        let server = try await ServerProcess()
        let counter = try await RemoteReactor<CounterReactor>.create(type: "counter", at: server.url)
        let session = URLSession(configuration: .ephemeral, delegate: nil, delegateQueue: SessionQueues.delegateQueue())
        var request = URLRequest(url: server.url.appendingPathComponent("reactors/\(counter.id)/actions"))
        request.httpMethod = "POST"
        request.httpBody = Data(#""increase""#.utf8)
        let cancelled = Task { [request] in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await SessionQueues.data(for: request, on: session)
        }
        await #expect(throws: URLError.self) { _ = try await cancelled.value }
        // The next action is the first the counter got.
        let (body, _) = try await SessionQueues.data(for: request, on: session)
        #expect(String(decoding: body, as: UTF8.self).contains(#""seq":1"#))
    }
}
