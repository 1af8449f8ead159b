import Foundation
import Testing

/// Event streams against a live `reactor-server`, read by `curl -N` and parsed as SSE.
@Suite(.serialized)
struct EventStreamTests {
    @Test func firstEventIsTheCurrentStateThenEveryChange() async throws {
        let server = try await ServerProcess(arguments: ["--counter-delay-ms", "0"])
        defer { server.stop() }
        let client = HTTPClient(base: server.base)
        let id = try await client.create("counter")
        let stream = try EventStreamClient(url: "\(server.base)/reactors/\(id)/events")
        let first = await stream.wait { !$0.isEmpty }
        #expect(first.first?.name == "state")
        #expect(first.first?.version == 0)
        #expect(stream.retry == 3000)

        _ = try await client.post("/reactors/\(id)/actions?wait=true", #""increase""#)
        let events = await stream.wait { $0.last?.version == 4 }
        #expect(events.map(\.version) == [0, 1, 2, 3, 4])
        let loading = events.map { $0.json["isLoading"] as? Bool }
        #expect(loading == [false, true, true, false, false])
        let alert = events.last?.json["alertMessage"] as? [String: Any]
        #expect(alert?["value"] as? String == "increased!")
        #expect(alert?["count"] as? Int == 1)
    }

    @Test func concurrentClientsOnOneCounterApplyEveryActionOnce() async throws {
        let server = try await ServerProcess(arguments: ["--counter-delay-ms", "0"])
        defer { server.stop() }
        let client = HTTPClient(base: server.base)
        let id = try await client.create("counter")
        let subscribers = try (0..<4).map { _ in try EventStreamClient(url: "\(server.base)/reactors/\(id)/events") }
        for subscriber in subscribers { await subscriber.wait { !$0.isEmpty } }

        let (accepted, resent) = try await withThrowingTaskGroup(of: (accepted: Int, resent: Int).self) { group in
            for sender in 0..<32 {
                group.addTask {
                    var accepted = 0
                    var resent = 0
                    for action in 0..<200 {
                        // Each action carries a key of its own, as the Swift client's do, so one
                        // whose answer is lost on the way is sent again and still applied once.
                        // URLSession reported "Empty reply from server" for one POST of this test
                        // in 2 of about 30 runs of the whole suite (once under ThreadSanitizer),
                        // the server having logged nothing; the cause is not known.
                        let key = ["Idempotency-Key": "sender-\(sender)-action-\(action)"]
                        var reply: Reply?
                        for attempt in 1...3 where reply == nil {
                            do {
                                reply = try await client.post("/reactors/\(id)/actions", #""increase""#, headers: key)
                            } catch  where attempt < 3 {
                                resent += 1
                                print("EventStreamTests: \(error.localizedDescription); sent again with its key")
                            }
                        }
                        if reply?.status == 202 { accepted += 1 }
                    }
                    return (accepted, resent)
                }
            }
            return try await group.reduce((0, 0)) { ($0.0 + $1.accepted, $0.1 + $1.resent) }
        }
        #expect(accepted == 6400)
        // A lost answer is rare: a server that dropped connections would fail here.
        #expect(resent <= 3)

        // A 202 means queued: the reactor threads may still be applying the last actions when the
        // last reply arrives, so the state is read once the streams have seen the final version.
        for subscriber in subscribers {
            let events = await subscriber.wait { $0.last?.version == 25_600 }
            let versions = events.compactMap(\.version)
            #expect(versions.last == 25_600)
            #expect(zip(versions, versions.dropFirst()).allSatisfy { $0 < $1 }, "versions strictly increase")
            #expect(events.last?.json["value"] as? Int == 6400)
        }

        let final = try await client.get("/reactors/\(id)")
        #expect((final.json["state"] as? [String: Any])?["value"] as? Int == 6400)
        #expect(final.json["version"] as? Int == 25_600)
    }

    @Test func reconnectingWithLastEventIDReplaysMissedVersions() async throws {
        let server = try await ServerProcess(arguments: ["--counter-delay-ms", "0"])
        defer { server.stop() }
        let client = HTTPClient(base: server.base)
        let id = try await client.create("counter")
        let url = "\(server.base)/reactors/\(id)/events"

        let first = try EventStreamClient(url: url)
        _ = try await client.post("/reactors/\(id)/actions", #""increase""#)
        await first.wait { $0.last?.version == 4 }
        first.stop()

        for _ in 0..<3 { _ = try await client.post("/reactors/\(id)/actions", #""increase""#) }

        let resumed = try EventStreamClient(url: url, headers: ["Last-Event-ID": "4"])
        let events = await resumed.wait { $0.last?.version == 16 }
        #expect(events.compactMap(\.version) == Array(5...16))
        #expect(events.last?.json["value"] as? Int == 4)

        let byQuery = try EventStreamClient(url: url + "?lastEventId=14")
        let tail = await byQuery.wait { $0.last?.version == 16 }
        #expect(tail.compactMap(\.version) == [15, 16])
    }

    @Test func anExpiredHistoryGivesAFreshSnapshot() async throws {
        let server = try await ServerProcess(arguments: ["--counter-delay-ms", "0", "--history-size", "8"])
        defer { server.stop() }
        let client = HTTPClient(base: server.base)
        let id = try await client.create("counter")
        for _ in 0..<5 { _ = try await client.post("/reactors/\(id)/actions", #""increase""#) }
        // A 202 means queued: resume once the fifth action's last version is published.
        try await EventStreamClient.waitUntilPublished(20, url: "\(server.base)/reactors/\(id)/events")
        let resumed = try EventStreamClient(
            url: "\(server.base)/reactors/\(id)/events",
            headers: ["Last-Event-ID": "2"])
        let events = await resumed.wait { !$0.isEmpty }
        #expect(events.compactMap(\.version) == [20])

        let fromTheFuture = try EventStreamClient(
            url: "\(server.base)/reactors/\(id)/events",
            headers: ["Last-Event-ID": "999"])
        let snapshot = await fromTheFuture.wait { !$0.isEmpty }
        #expect(snapshot.compactMap(\.version) == [20])

        // The largest version there is: a snapshot too (it used to overflow and stop the server).
        let fromTheEnd = try EventStreamClient(
            url: "\(server.base)/reactors/\(id)/events",
            headers: ["Last-Event-ID": String(UInt64.max)])
        let last = await fromTheEnd.wait { !$0.isEmpty }
        #expect(last.compactMap(\.version) == [20])
        #expect(try await client.get("/healthz").status == 200)
    }

    @Test func aMessageSaidInOneRoomInstanceReachesAnother() async throws {
        let server = try await ServerProcess()
        defer { server.stop() }
        let client = HTTPClient(base: server.base)
        let alice = try await client.create("room")
        let bob = try await client.create("room")
        let bobStream = try EventStreamClient(url: "\(server.base)/reactors/\(bob)/events")
        await bobStream.wait { !$0.isEmpty }
        let said = try await client.post("/reactors/\(alice)/actions", #"{"say":{"text":"hello from alice"}}"#)
        #expect(said.status == 202)
        let events = await bobStream.wait { events in
            events.contains { $0.data.contains("hello from alice") }
        }
        #expect(events.contains { $0.data.contains("hello from alice") })
    }

    @Test func deletingAnInstanceEndsItsStreams() async throws {
        let server = try await ServerProcess()
        defer { server.stop() }
        let client = HTTPClient(base: server.base)
        let id = try await client.create("counter")
        let stream = try EventStreamClient(url: "\(server.base)/reactors/\(id)/events")
        await stream.wait { !$0.isEmpty }
        _ = try await client.send("DELETE", "/reactors/\(id)")
        let events = await stream.waitForEnd()
        #expect(events.last?.name == "end")
        #expect(events.last?.json["reason"] as? String == "deleted")
        #expect(stream.isFinished)
    }

    @Test func sigtermEndsOpenStreamsCleanlyAndExitsZero() async throws {
        let server = try await ServerProcess()
        let client = HTTPClient(base: server.base)
        let id = try await client.create("counter")
        let streams = try (0..<3).map { _ in try EventStreamClient(url: "\(server.base)/reactors/\(id)/events") }
        for stream in streams { await stream.wait { !$0.isEmpty } }
        let status = server.stop()
        #expect(status == .exited(0))
        for stream in streams {
            let events = await stream.waitForEnd()
            #expect(events.last?.name == "end")
            #expect(events.last?.json["reason"] as? String == "shutdown")
        }
    }
}
