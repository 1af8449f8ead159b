import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A package written against an earlier release still compiles (this target is that package's
/// code, with its imports) and serves.
@Suite struct LegacyAPITests {
    @Test func theServiceOfTheEarlierReadmeServesItsReactor() async throws {
        let server = makeStopwatchServer(port: 0)
        try server.start()
        defer { server.shutdown() }
        let base = URL(string: "http://127.0.0.1:\(server.port)")!
        var create = URLRequest(url: base.appendingPathComponent("reactors"))
        create.httpMethod = "POST"
        create.httpBody = Data(#"{"type":"stopwatch"}"#.utf8)
        let (body, response) = try await URLSession.shared.data(for: create)
        #expect((response as? HTTPURLResponse)?.statusCode == 201)
        let created = try JSONSerialization.jsonObject(with: body) as? [String: Any]
        let id = try #require(created?["id"] as? String)
        var start = URLRequest(
            url: base.appendingPathComponent("reactors/\(id)/actions").appending(queryItems: [.init(name: "wait", value: "true")]))
        start.httpMethod = "POST"
        start.httpBody = Data(#""start""#.utf8)
        let (answer, started) = try await URLSession.shared.data(for: start)
        #expect((started as? HTTPURLResponse)?.statusCode == 200)
        let state = (try JSONSerialization.jsonObject(with: answer) as? [String: Any])?["state"] as? [String: Any]
        #expect(state?["isRunning"] as? Bool == true)
    }
}
