import Foundation
import Testing

@testable import ReactorHTTP

/// `GET /reactors/{id}/history` (the kept versions with the action that produced each) and the
/// inspector's embedded pages, through the router in-process.
@Suite struct HistoryAndInspectorTests {
    let client = RouterClient()

    @Test func historyNamesTheActionBehindEachVersion() async throws {
        let id = try await client.create("counter")
        let waited = await client.post("/reactors/\(id)/actions?wait=true", #""increase""#)
        #expect(waited.status == 200)

        let history = await client.get("/reactors/\(id)/history")
        #expect(history.status == 200)
        #expect(history.header("Content-Type") == "application/json")
        #expect(history.json["id"] as? String == id)
        #expect(history.json["type"] as? String == "counter")
        #expect(history.json["version"] as? Int == 4)
        let versions = try #require(history.json["versions"] as? [[String: Any]])
        #expect(versions.compactMap { $0["version"] as? Int } == [0, 1, 2, 3, 4])
        // The initial state came from no action; the counter's four states after it from action 1.
        #expect(versions[0]["seq"] is NSNull)
        #expect(versions[0]["at"] is NSNull)
        #expect(versions.dropFirst().allSatisfy { $0["seq"] as? Int == 1 && $0["at"] is String })
        let states = versions.compactMap { $0["state"] as? [String: Any] }
        #expect(states.compactMap { $0["isLoading"] as? Bool } == [false, true, true, false, false])
        #expect(states.compactMap { $0["value"] as? Int } == [0, 0, 1, 1, 1])

        let actions = try #require(history.json["actions"] as? [[String: Any]])
        #expect(actions.count == 1)
        #expect(actions.first?["seq"] as? Int == 1)
        #expect(actions.first?["action"] as? String == "increase")
        let at = try #require(actions.first?["at"] as? String)
        #expect(at.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil)
    }

    @Test func historyAfterAVersionHoldsOnlyNewerOnes() async throws {
        let id = try await client.create("todo")
        for title in ["milk", "eggs"] {
            #expect(await client.post("/reactors/\(id)/actions", #"{"add":{"title":"\#(title)"}}"#).status == 202)
        }
        let newer = await client.get("/reactors/\(id)/history?after=1")
        let versions = try #require(newer.json["versions"] as? [[String: Any]])
        #expect(versions.compactMap { $0["version"] as? Int } == [2])
        #expect(versions.first?["seq"] as? Int == 2)
        // Actions are kept with their JSON, keys sorted.
        let actions = try #require(newer.json["actions"] as? [[String: Any]])
        #expect(actions.compactMap { $0["seq"] as? Int } == [1, 2])
        let second = try #require(actions.last?["action"] as? [String: Any])
        #expect((second["add"] as? [String: Any])?["title"] as? String == "eggs")

        let none = await client.get("/reactors/\(id)/history?after=2")
        #expect((none.json["versions"] as? [Any])?.isEmpty == true)
    }

    @Test func historyKeepsOnlyTheHistoryCapacity() async throws {
        var configuration = RouterClient.defaultConfiguration
        configuration.historyCapacity = 3
        let client = RouterClient(configuration: configuration)
        let id = try await client.create("todo")
        for index in 1...5 {
            #expect(await client.post("/reactors/\(id)/actions", #"{"add":{"title":"t\#(index)"}}"#).status == 202)
        }
        let history = await client.get("/reactors/\(id)/history")
        #expect((history.json["versions"] as? [[String: Any]])?.compactMap { $0["version"] as? Int } == [3, 4, 5])
        #expect((history.json["actions"] as? [[String: Any]])?.compactMap { $0["seq"] as? Int } == [3, 4, 5])
    }

    @Test func historyRefusesABadVersionAndAnUnknownId() async throws {
        let id = try await client.create("counter")
        let bad = await client.get("/reactors/\(id)/history?after=-1")
        #expect(bad.status == 400)
        #expect(bad.json["type"] as? String == "urn:reactor-server:problem:invalid-parameter")
        let unknown = await client.get("/reactors/AAAAAAAAAAAAAAAAAAAAAA/history")
        #expect(unknown.status == 404)
        #expect(unknown.json["type"] as? String == "urn:reactor-server:problem:unknown-instance")
    }

    @Test func theLandingPageAndTheInspectorAreServedWithTheirAssets() async throws {
        for path in ["/", "/inspector"] {
            let page = await client.get(path)
            #expect(page.status == 200, "\(path)")
            #expect(page.header("Content-Type") == "text/html; charset=utf-8")
            #expect(page.header("Content-Security-Policy")?.hasPrefix("default-src 'self'") == true)
            #expect(page.header("Referrer-Policy") == "no-referrer")
            #expect(page.text.contains("<html"), "\(path)")
            // The token field's script, before the page's own, which uses it.
            let scripts = page.text.components(separatedBy: "<script src=\"").dropFirst().map { $0.prefix { $0 != "\"" } }
            #expect(scripts.first == "/assets/auth.js" && scripts.count == 2, "\(path): \(scripts)")
        }
        for name in ["inspector.js", "landing.js", "auth.js"] {
            let script = await client.get("/assets/\(name)")
            #expect(script.status == 200, "\(name)")
            #expect(script.header("Content-Type") == "text/javascript; charset=utf-8")
        }
        let style = await client.get("/assets/common.css")
        #expect(style.header("Content-Type") == "text/css; charset=utf-8")
        let missing = await client.get("/assets/..%2FPackage.swift")
        #expect(missing.status == 404)
        #expect(missing.header("Content-Type") == "application/problem+json")
    }

    @Test(arguments: [
        (Int64(0), "1970-01-01T00:00:00.000Z"),
        (951_782_400_123, "2000-02-29T00:00:00.123Z"),
        (1_795_618_801_999, "2026-11-25T15:00:01.999Z"),
        (4_102_444_799_000, "2099-12-31T23:59:59.000Z"),
        (-5, "1970-01-01T00:00:00.000Z"),
    ])
    func timestampsAreRFC3339InUTC(milliseconds: Int64, expected: String) {
        #expect(RFC3339.format(milliseconds: milliseconds) == expected)
    }
}
