import MicroHTTP
import Testing
@testable import ReactorHTTP

/// The timeline's subscriber bookkeeping (streams leave in any order, each exactly once) and its
/// snapshot of the latest version.
@Suite struct StateTimelineTests {
    private func makeTimeline(limit: Int) -> StateTimeline {
        StateTimeline.make(initial: 0, historyCapacity: 4, subscriberLimit: limit).timeline
    }

    private func makeSubscriber(_ timeline: StateTimeline) -> EventSubscriber {
        EventSubscriber(timeline: timeline, resumingAfter: nil, retryMilliseconds: 1000) {}
    }

    @Test func aStatesEventCarriesItsVersionAndJSONWithNoSpareRoom() {
        for version: UInt64 in [0, 9, 10, 1_234_567_890_123, .max] {
            let encoded = EncodedState(version: version, json: Array(#"{"a":1}"#.utf8))
            #expect(encoded.event == Array("id: \(version)\nevent: state\ndata: {\"a\":1}\n\n".utf8))
            #expect(encoded.event.capacity <= encoded.event.count + 16)
        }
    }

    @Test func subscribersLeaveInAnyOrderAndFreeTheirPlaces() throws {
        let timeline = makeTimeline(limit: 5)
        let subscribers = (0..<5).map { _ in makeSubscriber(timeline) }
        for subscriber in subscribers { try timeline.attach(subscriber) }
        #expect(throws: Problem.self) { try timeline.attach(makeSubscriber(timeline)) }

        timeline.detach(subscribers[1])
        timeline.detach(subscribers[4])
        timeline.detach(subscribers[1])  // a second detach changes nothing
        #expect(timeline.subscriberCount == 3)
        #expect(subscribers.map(timeline.isAttached) == [true, false, true, true, false])

        let late = (0..<2).map { _ in makeSubscriber(timeline) }
        for subscriber in late { try timeline.attach(subscriber) }
        #expect(throws: Problem.self) { try timeline.attach(makeSubscriber(timeline)) }

        timeline.detach(subscribers[0])
        #expect(subscribers.map(timeline.isAttached) == [false, false, true, true, false])
        for subscriber in [subscribers[3], subscribers[2]] { timeline.detach(subscriber) }
        #expect(timeline.subscriberCount == 2)
        #expect(subscribers.map(timeline.isAttached) == [false, false, false, false, false])
        for subscriber in late.reversed() { timeline.detach(subscriber) }
        #expect(timeline.subscriberCount == 0)
    }

    @Test func onlyTheLatestVersionKeepsItsSnapshotAndRequestsForItShareOne() {
        let (timeline, publisher) = StateTimeline.make(initial: 0, historyCapacity: 4, subscriberLimit: 1)
        var built: [UInt64] = []
        func snapshot() -> InstanceSnapshot {
            timeline.latestSnapshot { state in
                built.append(state.version)
                return InstanceSnapshot(version: state.version, etag: "\"\(state.version)\"",
                                        response: PreparedResponse(status: 200, headers: [:], body: state.json))
            }
        }
        let first = snapshot()
        #expect(snapshot() === first)
        #expect(first.response.body == Array("0".utf8))
        weak let released = first.response
        publisher.publish(10, version: 1)
        let second = snapshot()
        #expect(second.version == 1)
        #expect(second.response.body == Array("10".utf8))
        #expect(snapshot() === second)
        #expect(built == [0, 1])
        _ = consume first
        #expect(released == nil)  // the timeline let version 0's snapshot go
    }
}
