import Foundation
import Testing

/// Every route and every error, against a live `reactor-server` on 127.0.0.1.
@Suite(.serialized)
struct RoutesTests {
    let server: ServerProcess
    let client: HTTPClient

    init() throws {
        server = try ServerProcess(arguments: ["--counter-delay-ms", "0", "--max-body-bytes", "4096"])
        client = HTTPClient(base: server.base)
    }

    @Test func typesListTheExampleReactorsWithInitialStates() async throws {
        let reply = try await client.get("/types")
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
        let created = try await client.post("/reactors", #"{"type":"counter"}"#)
        #expect(created.status == 201)
        let id = try #require(created.json["id"] as? String)
        #expect(id.count >= 22)
        #expect(created.header("Location") == "/reactors/\(id)")
        #expect(created.json["type"] as? String == "counter")
        #expect(created.json["version"] as? Int == 0)

        let read = try await client.get("/reactors/\(id)")
        #expect(read.status == 200)
        #expect(read.header("ETag") == "\"0\"")
        #expect((read.json["state"] as? [String: Any])?["value"] as? Int == 0)

        let notModified = try await client.get("/reactors/\(id)", headers: ["If-None-Match": "\"0\""])
        #expect(notModified.status == 304)

        let deleted = try await client.send("DELETE", "/reactors/\(id)")
        #expect(deleted.status == 204)
        let gone = try await client.get("/reactors/\(id)")
        #expect(gone.status == 404)
        #expect(gone.header("Content-Type") == "application/problem+json")
        #expect(gone.json["type"] as? String == "urn:reactor-server:problem:unknown-instance")
    }

    @Test func anIdWithEscapedCharactersNamesTheSameInstance() async throws {
        let id = try await client.create("counter")
        // Every character percent-encoded, as a client escaping more than it needs to might send it.
        let escaped = id.utf8.map { String(format: "%%%02X", $0) }.joined()
        let action = try await client.post("/reactors/\(escaped)/actions", #""increase""#)
        #expect(action.status == 202)
        #expect(action.json["seq"] as? Int == 1)
        let read = try await client.get("/reactors/\(escaped)")
        #expect(read.status == 200)
        #expect(read.json["id"] as? String == id)
        let wrong = try await client.get("/reactors/\(escaped.dropLast(3))%2A")
        #expect(wrong.status == 404)
    }

    @Test func actionsAreAcceptedWithSequenceNumbers() async throws {
        let id = try await client.create("counter")
        let first = try await client.post("/reactors/\(id)/actions", #""increase""#)
        #expect(first.status == 202)
        #expect(first.json["seq"] as? Int == 1)
        let second = try await client.post("/reactors/\(id)/actions", #""increase""#,
                                           headers: ["Content-Type": "application/x-www-form-urlencoded"])
        #expect(second.json["seq"] as? Int == 2)
        // A 202 means queued: read the state once a stream has seen the second action's last version.
        try await EventStreamClient.waitUntilPublished(8, url: "\(server.base)/reactors/\(id)/events")
        let state = try await client.get("/reactors/\(id)")
        #expect((state.json["state"] as? [String: Any])?["value"] as? Int == 2)
        #expect(state.json["version"] as? Int == 8)
    }

    @Test func waitAnswersWithTheStateOnceTheActionSettled() async throws {
        let slow = try ServerProcess(arguments: ["--counter-delay-ms", "50"])
        defer { slow.stop() }
        let client = HTTPClient(base: slow.base)
        let id = try await client.create("counter")
        let reply = try await client.post("/reactors/\(id)/actions?wait=true", #""decrease""#)
        #expect(reply.status == 200)
        #expect(reply.json["version"] as? Int == 4)
        let state = reply.json["state"] as? [String: Any]
        #expect(state?["value"] as? Int == -1)
        #expect(state?["isLoading"] as? Bool == false)
    }

    @Test func keyedActionsWithPayloads() async throws {
        let id = try await client.create("todo")
        let added = try await client.post("/reactors/\(id)/actions?wait=true", #"{"add":{"title":"milk"}}"#)
        #expect(added.status == 200)
        let tasks = (added.json["state"] as? [String: Any])?["tasks"] as? [[String: Any]]
        #expect(tasks?.first?["title"] as? String == "milk")
    }

    @Test func badActionsAreRejectedByNameAndChangeNothing() async throws {
        let id = try await client.create("counter")
        let unknown = try await client.post("/reactors/\(id)/actions", #""explode""#)
        #expect(unknown.status == 400)
        #expect(unknown.header("Content-Type") == "application/problem+json")
        #expect(unknown.json["type"] as? String == "urn:reactor-server:problem:invalid-action")
        #expect((unknown.json["detail"] as? String)?.contains("explode") == true)

        let todo = try await client.create("todo")
        let missing = try await client.post("/reactors/\(todo)/actions", #"{"add":{}}"#)
        #expect(missing.status == 400)
        #expect((missing.json["detail"] as? String)?.contains("title") == true)

        for body in ["{", "", "[1,2", "\u{FF}", #"{"increase":{}, "decrease":{}}"#] {
            let reply = try await client.post("/reactors/\(id)/actions", body)
            #expect(reply.status == 400, "body \(body.debugDescription)")
        }
        let wrongType = try await client.post("/reactors/\(id)/actions", #""increase""#,
                                              headers: ["Content-Type": "text/plain"])
        #expect(wrongType.status == 415)

        let state = try await client.get("/reactors/\(id)")
        #expect(state.json["version"] as? Int == 0)
    }

    @Test func unknownRoutesMethodsAndTypes() async throws {
        let route = try await client.get("/nope")
        #expect(route.status == 404)
        #expect(route.json["type"] as? String == "urn:reactor-server:problem:not-found")

        let method = try await client.send("PUT", "/reactors")
        #expect(method.status == 405)
        #expect(method.header("Allow")?.contains("POST") == true)
        #expect(method.json["type"] as? String == "urn:reactor-server:problem:method-not-allowed")

        let type = try await client.post("/reactors", #"{"type":"spaceship"}"#)
        #expect(type.status == 400)
        #expect(type.json["type"] as? String == "urn:reactor-server:problem:unknown-type")

        let noID = try await client.post("/reactors/AAAAAAAAAAAAAAAAAAAAAA/actions", #""increase""#)
        #expect(noID.status == 404)
    }

    @Test func oversizedBodiesAre413() async throws {
        let id = try await client.create("counter")
        let big = "\"" + String(repeating: "a", count: 10_000) + "\""
        let reply = try await client.post("/reactors/\(id)/actions", big)
        #expect(reply.status == 413)
        #expect(reply.header("Content-Type") == "application/problem+json")
    }

    @Test func healthAndMetrics() async throws {
        let health = try await client.get("/healthz")
        #expect(health.status == 200)
        _ = try await client.create("counter")
        let metrics = try await client.get("/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.text.contains("http_requests_total"))
        #expect(metrics.text.contains("reactor_instances"))
    }

    @Test func metricsCountEveryRequestByRouteMethodAndStatus() async throws {
        let id = try await client.create("counter")
        let gets = 40
        // From many connections at once, so that the server's threads all answer some.
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<gets { group.addTask { try await client.get("/reactors/\(id)").status } }
            for try await status in group { #expect(status == 200) }
        }
        for _ in 0..<5 { #expect(try await client.post("/reactors/\(id)/actions", #""increase""#).status == 202) }
        for _ in 0..<2 { #expect(try await client.post("/reactors/\(id)/actions", #""sideways""#).status == 400) }
        // Method names a client makes up share one series rather than adding one each.
        for method in ["FOO1", "FOO2"] { #expect(try await client.send(method, "/nowhere").status == 404) }

        let text = try await client.get("/metrics").text
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " ") else { continue }
            values[String(line[..<space])] = Double(line[line.index(after: space)...])
        }
        #expect(values[#"http_requests_total{route="/reactors/{id}",method="GET",status="200"}"#] == Double(gets))
        #expect(values[#"http_requests_total{route="/reactors/{id}/actions",method="POST",status="202"}"#] == 5)
        #expect(values[#"http_requests_total{route="/reactors/{id}/actions",method="POST",status="400"}"#] == 2)
        #expect(values[#"http_requests_total{route="unmatched",method="other",status="404"}"#] == 2)
        #expect(!text.contains("FOO"))
        #expect(values["reactor_actions_accepted_total"] == 5)

        let route = #"route="/reactors/{id}""#
        #expect(values["http_request_duration_seconds_count{\(route)}"] == Double(gets))
        let bounds = ["0.00005", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
                      "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf"]
        let buckets = bounds.compactMap { values["http_request_duration_seconds_bucket{\(route),le=\"\($0)\"}"] }
        #expect(buckets.count == bounds.count)
        #expect(buckets == buckets.sorted())  // cumulative
        #expect(buckets.last == Double(gets))
        let sum = try #require(values["http_request_duration_seconds_sum{\(route)}"])
        #expect(sum > 0 && sum < Double(gets) * 10)
    }

    @Test func badLastEventIDIsRejected() async throws {
        let id = try await client.create("counter")
        let reply = try await client.get("/reactors/\(id)/events", headers: ["Last-Event-ID": "yesterday"])
        #expect(reply.status == 400)
        #expect(reply.json["type"] as? String == "urn:reactor-server:problem:invalid-parameter")
    }
}
