import Foundation
import InMemoryTracing
import Logging
import MicroHTTP
import ReactorExamples
import ReactorHTTP
import ReactorHosting
import Testing
import Tracing

/// Each action traced with the tracer the service is given: a span from its request to its
/// settling, with `decode`, `queue`, `mutate`, each `reduce` and `first-event-write` under it,
/// carrying the type and the action's sequence and never the instance id. A real server on
/// 127.0.0.1 with a real event stream; the tracer records spans in memory.
@Suite struct TracingTests {
    private static func server(tracer: InMemoryTracer) throws -> ReactorServer {
        let server = inProcessCounterServer { $0.tracer = tracer }
        try server.start()
        return server
    }

    @Test func anActionIsTracedFromItsRequestToItsFirstEventWrite() async throws {
        let tracer = InMemoryTracer()
        let server = try Self.server(tracer: tracer)
        defer { server.shutdown() }
        let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
        let id = try await client.create("counter")
        let stream = try EventStreamClient(url: "http://127.0.0.1:\(server.port)/reactors/\(id)/events")
        defer { stream.stop() }
        await stream.wait { $0.contains { $0.version == 0 } }

        // The request continues a trace its caller started (the tracer's own propagation keys).
        let reply = try await client.post(
            "/reactors/\(id)/actions?wait=true", #""increase""#,
            headers: [
                InMemoryTracer.traceIDKey: "trace-from-caller",
                InMemoryTracer.spanIDKey: "caller-span",
            ])
        #expect(reply.status == 200)
        let events = await stream.wait { $0.contains { $0.version == 4 } }
        #expect(events.last?.version == 4)

        let spans = tracer.finishedSpans
        let action = try #require(spans.first { $0.operationName == "reactor.action" })
        #expect(action.traceID == "trace-from-caller")
        #expect(action.attributes.get("reactor.type") == .string("counter"))
        #expect(action.attributes.get("reactor.action.seq") == .int64(1))
        let children = spans.filter { $0.parentSpanID == action.spanID }
        let names = children.map(\.operationName)
        #expect(names.filter { $0 == "decode" }.count == 1)
        #expect(names.filter { $0 == "queue" }.count == 1)
        #expect(names.filter { $0 == "mutate" }.count == 1)
        // The counter's increase: loading, the new value, loaded, the alert.
        #expect(versions(of: children, named: "reduce") == [1, 2, 3, 4])
        #expect(versions(of: children, named: "first-event-write") == [1, 2, 3, 4])
        #expect(children.filter { $0.operationName != "decode" }.allSatisfy { $0.attributes.get("reactor.action.seq") == .int64(1) })
        // Nothing names the instance: the id is its owner's credential.
        for span in spans {
            span.attributes.forEach { key, value in
                #expect(!"\(key)\(value)".contains(id), "span \(span.operationName) names the id")
            }
        }
    }

    @Test func withASessionStoreTheWaitForTheActionsCommitIsASpanOfItsOwn() async throws {
        let tracer = InMemoryTracer()
        let server = inProcessCounterServer {
            $0.tracer = tracer
            $0.store = InMemorySessionStore(historyCapacity: 16)
        }
        try server.start()
        defer { server.shutdown() }
        let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
        let id = try await client.create("counter")
        #expect(try await client.post("/reactors/\(id)/actions?wait=true", #""increase""#).status == 200)
        let spans = tracer.finishedSpans
        let action = try #require(spans.first { $0.operationName == "reactor.action" })
        let commit = try #require(spans.first { $0.operationName == "commit" && $0.parentSpanID == action.spanID })
        #expect(commit.attributes.get("reactor.action.seq") == .int64(1))
        #expect(commit.errors.isEmpty)
    }

    /// The versions the spans named `name` carry, in order.
    private func versions(of spans: [FinishedInMemorySpan], named name: String) -> [Int64] {
        spans.filter { $0.operationName == name }.compactMap { span -> Int64? in
            guard case .int64(let version) = span.attributes.get("reactor.version") else { return nil }
            return version
        }.sorted()
    }

    @Test func aRefusedActionEndsItsSpanWithTheError() async throws {
        let tracer = InMemoryTracer()
        let server = try Self.server(tracer: tracer)
        defer { server.shutdown() }
        let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
        let id = try await client.create("counter")
        let reply = try await client.post("/reactors/\(id)/actions", #""fly""#)
        #expect(reply.status == 400)
        let spans = tracer.finishedSpans
        let action = try #require(spans.first { $0.operationName == "reactor.action" })
        #expect(action.errors.count == 1)
        let decode = try #require(spans.first { $0.operationName == "decode" })
        #expect(decode.parentSpanID == action.spanID)
        #expect(decode.errors.count == 1)
        #expect(!spans.contains { $0.operationName == "queue" || $0.operationName == "mutate" })
    }
}
