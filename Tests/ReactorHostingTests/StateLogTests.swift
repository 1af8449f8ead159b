import Synchronization
import TestSupport
import Testing

@testable import ReactorHosting

/// The ring of published states behind a timeline: what it replays, what it drops, and that
/// each version becomes one shared object at most.
@Suite struct StateLogTests {
    private func log(capacity: Int, publishedThrough newest: UInt64) -> TypedStateLog<Int> {
        let log = TypedStateLog(initial: 0, historyCapacity: capacity)
        if newest > 0 {
            for version in 1...newest { log.append(Int(version) * 10, version: version) }
        }
        return log
    }

    @Test func replaysEveryVersionAfterOneItStillHolds() throws {
        let log = log(capacity: 4, publishedThrough: 2)
        #expect(log.newestVersion == 2)
        #expect(try #require(log.states(after: 0)).map(\.version) == [1, 2])
        #expect(try #require(log.states(after: 2)).isEmpty)
        #expect(log.newest().json == Array("20".utf8))
    }

    @Test func dropsTheOldestOnceFullAndWrapsAround() throws {
        let log = log(capacity: 4, publishedThrough: 9)  // holds 6, 7, 8, 9
        #expect(log.newestVersion == 9)
        #expect(try #require(log.states(after: 5)).map(\.version) == [6, 7, 8, 9])
        #expect(try #require(log.states(after: 7)).map(\.json) == [Array("80".utf8), Array("90".utf8)])
        #expect(log.states(after: 4) == nil)  // 5 was dropped
        #expect(log.states(after: 10) == nil)  // never published
        #expect(log.states(after: .max) == nil)
    }

    @Test func aGapInVersionsRestartsTheHistory() throws {
        let log = log(capacity: 4, publishedThrough: 2)
        log.append(50, version: 5)  // 3 and 4 never arrived
        #expect(log.newestVersion == 5)
        #expect(log.states(after: 2) == nil)
        #expect(log.states(after: 3) == nil)
        #expect(try #require(log.states(after: 4)).map(\.json) == [Array("50".utf8)])
        log.append(60, version: 6)
        #expect(try #require(log.states(after: 4)).map(\.version) == [5, 6])
        #expect(log.newest().json == Array("60".utf8))
    }

    /// Random appends (some skipping versions) and reads against a plain array of what the log
    /// should hold, across capacities that wrap, grow and never grow.
    @Test(arguments: [0, 1, 2, 3, 8, 20])
    func agreesWithASimpleModel(capacity: Int) throws {
        var random = SplitMix64(seed: UInt64(capacity) &+ 1)
        let log = TypedStateLog(initial: 0, historyCapacity: capacity)
        var model: [(version: UInt64, value: Int)] = [(0, 0)]
        for step in 1...2_000 {
            let newest = model[model.count - 1].version
            if random.next() % 10 < 7 {
                let version = newest + (random.next() % 10 == 0 ? 2 + random.next() % 4 : 1)
                let value = step
                log.append(value, version: version)
                if version != newest + 1 { model.removeAll() }
                model.append((version, value))
                if model.count > max(1, capacity) { model.removeFirst() }
            } else {
                let asked = newest.saturatingSubtract(40) + random.next() % 43
                let expected: [(version: UInt64, value: Int)]?
                if capacity == 0 || asked > newest || asked + 1 < model[0].version {
                    expected = nil
                } else {
                    expected = model.filter { $0.version > asked }
                }
                let replayed = log.states(after: asked)
                #expect(replayed?.map(\.version) == expected?.map(\.version), "after \(asked), step \(step)")
                #expect(replayed?.map(\.json) == expected?.map { Array(String($0.value).utf8) })
                if let last = replayed?.last { #expect(last === log.newest()) }
            }
            #expect(log.newestVersion == model[model.count - 1].version)
            #expect(log.newest().json == Array(String(model[model.count - 1].value).utf8))
        }
    }

    @Test func aCapacityOfZeroKeepsOnlyTheNewestAndReplaysNothing() {
        let log = log(capacity: 0, publishedThrough: 3)
        #expect(log.newestVersion == 3)
        #expect(log.newest().json == Array("30".utf8))
        #expect(log.states(after: 2) == nil)
    }

    @Test func eachVersionBecomesOneSharedObject() throws {
        let log = log(capacity: 8, publishedThrough: 3)
        #expect(log.newest() === log.newest())
        let replayed = try #require(log.states(after: 1))
        #expect(replayed.last === log.newest())
        #expect(try #require(log.states(after: 1)).first === replayed.first)
        log.append(40, version: 4)
        #expect(log.newest() !== replayed.last)
        #expect(log.newest().version == 4)
    }

    @Test func releasesEveryStateItDropsOrHolds() {
        let live = LiveCount()
        do {
            let log = TypedStateLog(initial: Probe(live), historyCapacity: 3)
            for version in 1...10 { log.append(Probe(live), version: UInt64(version)) }
            _ = log.states(after: 8)  // builds shared objects holding two of them
            #expect(live.value.load(ordering: .relaxed) == 3)
        }
        #expect(live.value.load(ordering: .relaxed) == 0)
    }
}

extension UInt64 {
    fileprivate func saturatingSubtract(_ other: UInt64) -> UInt64 { self > other ? self - other : 0 }
}

/// How many probes' tokens are alive.
private final class LiveCount: Sendable {
    let value = Atomic<Int>(0)
}

/// A state holding a token that counts itself alive until its last owner lets go.
private struct Probe: Encodable, Sendable {
    final class Token: Sendable {
        let live: LiveCount
        init(_ live: LiveCount) {
            self.live = live
            live.value.add(1, ordering: .relaxed)
        }
        deinit { live.value.subtract(1, ordering: .relaxed) }
    }

    let token: Token

    init(_ live: LiveCount) { token = Token(live) }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(0)
    }
}
