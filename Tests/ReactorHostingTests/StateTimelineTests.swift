import Testing

@testable import ReactorHosting

/// The timeline's subscriber bookkeeping (streams leave in any order, each exactly once) and its
/// snapshot of the latest version.
@Suite struct StateTimelineTests {
    private func makeTimeline(limit: Int) -> StateTimeline {
        StateTimeline.make(initial: 0, historyCapacity: 4, subscriberLimit: limit).timeline
    }

    private final class Subscriber: TimelineSubscriber {
        func wake() {}
        func enqueue(event: [UInt8]) {}
    }

    private final class Snapshot: LatestSnapshot {
        let version: UInt64
        let body: [UInt8]
        init(version: UInt64, body: [UInt8]) {
            self.version = version
            self.body = body
        }
    }

    private func makeSubscriber(_ timeline: StateTimeline) -> Subscriber { Subscriber() }

    @Test func aStateIsFramedOnceAndTheFramingIsShared() {
        let (timeline, _) = StateTimeline.make(initial: 7, historyCapacity: 4, subscriberLimit: 1)
        var framings = 0
        let first = timeline.latest.framed { version, json in
            framings += 1
            return Array("\(version):".utf8) + json
        }
        let second = timeline.latest.framed { _, _ in
            framings += 1
            return []
        }
        #expect(first == Array("0:7".utf8))
        #expect(second == first)
        #expect(framings == 1)
    }

    /// Bytes given with a state (the store's encoding) are kept with it only while someone
    /// watches; otherwise a reader gets the state encoded again. The given bytes here differ from
    /// the encoding on purpose, to tell which one a reader got.
    @Test func givenJSONIsKeptOnlyWhileTheTimelineHasSubscribers() throws {
        let (timeline, publisher) = StateTimeline.make(initial: 0, historyCapacity: 4, subscriberLimit: 1)
        let given = Array("\"given\"".utf8)
        publisher.publish(5, version: 1, json: given)
        #expect(timeline.latest.json == Array("5".utf8))

        let subscriber = makeSubscriber(timeline)
        try timeline.attach(subscriber)
        publisher.publish(6, version: 2, json: given)
        #expect(timeline.latest.json == given)
        // The version published unwatched is encoded again when replayed, too.
        #expect(timeline.states(after: 0)?.map(\.json) == [Array("5".utf8), given])
        timeline.detach(subscriber)
    }

    @Test func subscribersLeaveInAnyOrderAndFreeTheirPlaces() throws {
        let timeline = makeTimeline(limit: 5)
        let subscribers = (0..<5).map { _ in makeSubscriber(timeline) }
        for subscriber in subscribers { try timeline.attach(subscriber) }
        #expect(throws: HostingError.self) { try timeline.attach(makeSubscriber(timeline)) }

        timeline.detach(subscribers[1])
        timeline.detach(subscribers[4])
        timeline.detach(subscribers[1])  // a second detach changes nothing
        #expect(timeline.subscriberCount == 3)
        #expect(subscribers.map(timeline.isAttached) == [true, false, true, true, false])

        let late = (0..<2).map { _ in makeSubscriber(timeline) }
        for subscriber in late { try timeline.attach(subscriber) }
        #expect(throws: HostingError.self) { try timeline.attach(makeSubscriber(timeline)) }

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
        func snapshot() -> Snapshot {
            timeline.latestSnapshot { state in
                built.append(state.version)
                return Snapshot(version: state.version, body: state.json)
            }
        }
        let first = snapshot()
        #expect(snapshot() === first)
        #expect(first.body == Array("0".utf8))
        weak let released = first
        publisher.publish(10, version: 1)
        let second = snapshot()
        #expect(second.version == 1)
        #expect(second.body == Array("10".utf8))
        #expect(snapshot() === second)
        #expect(built == [0, 1])
        _ = consume first
        #expect(released == nil)  // the timeline let version 0's snapshot go
    }
}
