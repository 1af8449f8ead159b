import Foundation
import Testing

/// Mutation errors on the event stream, limits that answer 429/503, and CORS, against a live server.
@Suite(.serialized)
struct LimitsAndErrorsTests {
    @Test func aFailingMutationIsAnErrorEventAndTheInstanceKeepsWorking() async throws {
        let server = try await ServerProcess()
        defer { server.stop() }
        let client = HTTPClient(base: server.base)
        let id = try await client.create("todo")
        let stream = try EventStreamClient(url: "\(server.base)/reactors/\(id)/events")
        await stream.wait { !$0.isEmpty }

        let toggled = try await client.post("/reactors/\(id)/actions", #"{"toggle":{"id":"no-such-task"}}"#)
        #expect(toggled.status == 202)
        let failing = try #require(toggled.json["seq"] as? Int)
        let events = await stream.wait { $0.contains { $0.name == "error" } }
        let error = try #require(events.first { $0.name == "error" })
        #expect(error.json["type"] as? String == "urn:reactor-server:problem:mutation-failed")
        #expect(error.json["action"] as? Int == failing)
        #expect((error.json["detail"] as? String)?.contains("no-such-task") == true)

        let added = try await client.post("/reactors/\(id)/actions?wait=true", #"{"add":{"title":"still works"}}"#)
        #expect(added.status == 200)
        let tasks = (added.json["state"] as? [String: Any])?["tasks"] as? [[String: Any]]
        #expect(tasks?.count == 1)
    }

    @Test func theInstanceLimitAnswers429WithRetryAfterAndSparesExistingInstances() async throws {
        let server = try await ServerProcess(arguments: ["--max-instances", "2", "--counter-delay-ms", "0"])
        defer { server.stop() }
        let client = HTTPClient(base: server.base)
        let first = try await client.create("counter")
        _ = try await client.create("counter")
        let refused = try await client.post("/reactors", #"{"type":"counter"}"#)
        #expect(refused.status == 429)
        #expect(refused.header("Retry-After") != nil)
        #expect(refused.json["type"] as? String == "urn:reactor-server:problem:too-many-instances")

        let action = try await client.post("/reactors/\(first)/actions?wait=true", #""increase""#)
        #expect(action.status == 200)

        _ = try await client.send("DELETE", "/reactors/\(first)")
        #expect(try await client.post("/reactors", #"{"type":"counter"}"#).status == 201)
    }

    @Test func streamLimitsAnswer429PerInstanceAnd503ServerWide() async throws {
        let server = try await ServerProcess(arguments: ["--max-streams", "3", "--max-streams-per-instance", "2"])
        defer { server.stop() }
        let client = HTTPClient(base: server.base)
        let busy = try await client.create("counter")
        let other = try await client.create("counter")
        let open = try (0..<2).map { _ in try EventStreamClient(url: "\(server.base)/reactors/\(busy)/events") }
        for stream in open { await stream.wait { !$0.isEmpty } }

        let perInstance = try await client.get("/reactors/\(busy)/events")
        #expect(perInstance.status == 429)
        #expect(perInstance.header("Retry-After") != nil)
        #expect(perInstance.json["type"] as? String == "urn:reactor-server:problem:too-many-streams")

        let third = try EventStreamClient(url: "\(server.base)/reactors/\(other)/events")
        await third.wait { !$0.isEmpty }
        let serverWide = try await client.get("/reactors/\(other)/events")
        #expect(serverWide.status == 503)
        #expect(serverWide.header("Retry-After") != nil)

        _ = try await client.post("/reactors/\(busy)/actions", #""increase""#)
        for stream in open {
            let events = await stream.wait { $0.last?.json["isLoading"] as? Bool == true }
            #expect(events.count >= 2)
        }
    }

    @Test func corsIsOffByDefaultAndAllowsConfiguredOrigins() async throws {
        let closed = try await ServerProcess()
        let closedClient = HTTPClient(base: closed.base)
        let plain = try await closedClient.get("/types", headers: ["Origin": "https://app.example"])
        #expect(plain.header("Access-Control-Allow-Origin") == nil)
        closed.stop()

        let open = try await ServerProcess(arguments: ["--cors-origins", "https://app.example"])
        defer { open.stop() }
        let client = HTTPClient(base: open.base)
        let allowed = try await client.get("/types", headers: ["Origin": "https://app.example"])
        #expect(allowed.header("Access-Control-Allow-Origin") == "https://app.example")
        let other = try await client.get("/types", headers: ["Origin": "https://evil.example"])
        #expect(other.header("Access-Control-Allow-Origin") == nil)

        let id = try await client.create("counter")
        let preflight = try await client.send(
            "OPTIONS", "/reactors/\(id)/actions",
            headers: [
                "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
            ])
        #expect(preflight.status == 204)
        #expect(preflight.header("Access-Control-Allow-Methods")?.contains("POST") == true)
        #expect(preflight.header("Access-Control-Allow-Origin") == "https://app.example")
    }
}
