import Foundation
import ReactorCore
import Testing

@testable import ReactorHTTP

/// Every route and every error, through the service's router in-process (`RouterClient`); what
/// only the wire shows is in `WireTests`.
@Suite struct RoutesTests {
    let client = RouterClient()

    @Test func typesListTheExampleReactorsWithInitialStates() async throws {
        let reply = await client.get("/types")
        #expect(reply.status == 200)
        let types = reply.json["types"] as? [[String: Any]] ?? []
        let names = types.compactMap { $0["name"] as? String }
        #expect(Set(names).isSuperset(of: ["counter", "todo", "search", "room"]))
        let counter = types.first { $0["name"] as? String == "counter" }
        let initial = counter?["initialState"] as? [String: Any]
        #expect(initial?["value"] as? Int == 0)
        #expect((counter?["exampleActions"] as? [Any])?.isEmpty == false)
    }

    @Test func createReadAndDeleteAnInstance() async throws {
        let created = await client.post("/reactors", #"{"type":"counter"}"#)
        #expect(created.status == 201)
        let id = try #require(created.json["id"] as? String)
        #expect(id.count >= 22)
        #expect(created.header("Location") == "/reactors/\(id)")
        #expect(created.json["type"] as? String == "counter")
        #expect(created.json["version"] as? Int == 0)

        let read = await client.get("/reactors/\(id)")
        #expect(read.status == 200)
        #expect(read.header("ETag") == "\"0\"")
        #expect((read.json["state"] as? [String: Any])?["value"] as? Int == 0)

        let notModified = await client.get("/reactors/\(id)", headers: ["If-None-Match": "\"0\""])
        #expect(notModified.status == 304)

        let deleted = await client.send("DELETE", "/reactors/\(id)")
        #expect(deleted.status == 204)
        let gone = await client.get("/reactors/\(id)")
        #expect(gone.status == 404)
        #expect(gone.header("Content-Type") == "application/problem+json")
        #expect(gone.json["type"] as? String == "urn:reactor-server:problem:unknown-instance")
    }

    @Test func anIdWithEscapedCharactersNamesTheSameInstance() async throws {
        let id = try await client.create("counter")
        // Every character percent-encoded, as a client escaping more than it needs to might send it.
        let escaped = id.utf8.map { String(format: "%%%02X", $0) }.joined()
        let action = await client.post("/reactors/\(escaped)/actions", #""increase""#)
        #expect(action.status == 202)
        #expect(action.json["seq"] as? Int == 1)
        let read = await client.get("/reactors/\(escaped)")
        #expect(read.status == 200)
        #expect(read.json["id"] as? String == id)
        let wrong = await client.get("/reactors/\(escaped.dropLast(3))%2A")
        #expect(wrong.status == 404)
    }

    @Test func actionsAreAcceptedWithSequenceNumbers() async throws {
        let id = try await client.create("counter")
        let first = await client.post("/reactors/\(id)/actions", #""increase""#)
        #expect(first.status == 202)
        #expect(first.json["seq"] as? Int == 1)
        let second = await client.post(
            "/reactors/\(id)/actions", #""increase""#,
            headers: ["Content-Type": "application/x-www-form-urlencoded"])
        #expect(second.json["seq"] as? Int == 2)
        // A 202 means queued: read the state once the second action has settled.
        let instance = try #require(client.service.table.instance(id))
        await withCheckedContinuation { settled in instance.whenSettled(ActionReceipt(sequence: 2)) { settled.resume() } }
        let state = await client.get("/reactors/\(id)")
        #expect((state.json["state"] as? [String: Any])?["value"] as? Int == 2)
        #expect(state.json["version"] as? Int == 8)
    }

    @Test func waitAnswersWithTheStateOnceTheActionSettled() async throws {
        let client = RouterClient(counterDelay: .milliseconds(50))
        let id = try await client.create("counter")
        let reply = await client.post("/reactors/\(id)/actions?wait=true", #""decrease""#)
        #expect(reply.status == 200)
        #expect(reply.json["version"] as? Int == 4)
        let state = reply.json["state"] as? [String: Any]
        #expect(state?["value"] as? Int == -1)
        #expect(state?["isLoading"] as? Bool == false)
    }

    @Test func keyedActionsWithPayloads() async throws {
        let id = try await client.create("todo")
        let added = await client.post("/reactors/\(id)/actions?wait=true", #"{"add":{"title":"milk"}}"#)
        #expect(added.status == 200)
        let tasks = (added.json["state"] as? [String: Any])?["tasks"] as? [[String: Any]]
        #expect(tasks?.first?["title"] as? String == "milk")
    }

    @Test func badActionsAreRejectedByNameAndChangeNothing() async throws {
        let id = try await client.create("counter")
        let unknown = await client.post("/reactors/\(id)/actions", #""explode""#)
        #expect(unknown.status == 400)
        #expect(unknown.header("Content-Type") == "application/problem+json")
        #expect(unknown.json["type"] as? String == "urn:reactor-server:problem:invalid-action")
        #expect((unknown.json["detail"] as? String)?.contains("explode") == true)

        let todo = try await client.create("todo")
        let missing = await client.post("/reactors/\(todo)/actions", #"{"add":{}}"#)
        #expect(missing.status == 400)
        #expect((missing.json["detail"] as? String)?.contains("title") == true)

        for body in ["{", "", "[1,2", "\u{FF}", #"{"increase":{}, "decrease":{}}"#] {
            let reply = await client.post("/reactors/\(id)/actions", body)
            #expect(reply.status == 400, "body \(body.debugDescription)")
        }
        let wrongType = await client.post(
            "/reactors/\(id)/actions", #""increase""#,
            headers: ["Content-Type": "text/plain"])
        #expect(wrongType.status == 415)

        let state = await client.get("/reactors/\(id)")
        #expect(state.json["version"] as? Int == 0)
    }

    @Test func unknownRoutesMethodsAndTypes() async throws {
        let route = await client.get("/nope")
        #expect(route.status == 404)
        #expect(route.json["type"] as? String == "urn:reactor-server:problem:not-found")

        let method = await client.send("PUT", "/reactors")
        #expect(method.status == 405)
        #expect(method.header("Allow")?.contains("POST") == true)
        #expect(method.json["type"] as? String == "urn:reactor-server:problem:method-not-allowed")

        let type = await client.post("/reactors", #"{"type":"spaceship"}"#)
        #expect(type.status == 400)
        #expect(type.json["type"] as? String == "urn:reactor-server:problem:unknown-type")

        let noID = await client.post("/reactors/AAAAAAAAAAAAAAAAAAAAAA/actions", #""increase""#)
        #expect(noID.status == 404)
    }

    @Test func healthAndMetrics() async throws {
        let health = await client.get("/healthz")
        #expect(health.status == 200)
        _ = try await client.create("counter")
        let metrics = await client.get("/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.text.contains("http_requests_total"))
        #expect(metrics.text.contains("reactor_instances"))
    }

    @Test func badLastEventIDIsRejected() async throws {
        let id = try await client.create("counter")
        let reply = await client.get("/reactors/\(id)/events", headers: ["Last-Event-ID": "yesterday"])
        #expect(reply.status == 400)
        #expect(reply.json["type"] as? String == "urn:reactor-server:problem:invalid-parameter")
    }
}
