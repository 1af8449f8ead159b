import Foundation
import Testing

/// What only a live `reactor-server` on 127.0.0.1 shows: limits libmicrohttpd enforces, many
/// connections on several threads, and one round trip over real sockets.
@Suite(.serialized)
struct WireTests {
    let server: ServerProcess
    let client: HTTPClient

    init() async throws {
        server = try await ServerProcess(arguments: ["--counter-delay-ms", "0", "--max-body-bytes", "4096"])
        client = HTTPClient(base: server.base)
    }

    @Test func createReadAndDeleteOverTheWire() async throws {
        let id = try await client.create("counter")
        let action = try await client.post("/reactors/\(id)/actions?wait=true", #""increase""#)
        #expect(action.status == 200)
        #expect(action.json["version"] as? Int == 4)
        let read = try await client.get("/reactors/\(id)")
        #expect(read.header("ETag") == "\"4\"")
        #expect(try await client.send("DELETE", "/reactors/\(id)").status == 204)
        #expect(try await client.get("/reactors/\(id)").status == 404)
    }

    @Test func oversizedBodiesAre413() async throws {
        let id = try await client.create("counter")
        let big = "\"" + String(repeating: "a", count: 10_000) + "\""
        let reply = try await client.post("/reactors/\(id)/actions", big)
        #expect(reply.status == 413)
        #expect(reply.header("Content-Type") == "application/problem+json")
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
        let bounds = [
            "0.00005", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
            "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf",
        ]
        let buckets = bounds.compactMap { values["http_request_duration_seconds_bucket{\(route),le=\"\($0)\"}"] }
        #expect(buckets.count == bounds.count)
        #expect(buckets == buckets.sorted())  // cumulative
        #expect(buckets.last == Double(gets))
        let sum = try #require(values["http_request_duration_seconds_sum{\(route)}"])
        #expect(sum > 0 && sum < Double(gets) * 10)
    }
}
