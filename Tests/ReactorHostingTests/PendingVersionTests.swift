import Locking
import Testing

@testable import ReactorHosting

/// Which writes a batch keeps: a session's last version always; the ones before it while the
/// session has readers, or while the action that produced them has not settled (a restart counts
/// them for the recovery hook); the rest are left out, and never encoded. An action accepted and
/// settled in the batch is not written, unless it carries an idempotency key. With async
/// durability, the record of an action in flight may wait for the next batch.
@Suite struct PendingVersionTests {
    private let encoded = Locked<[UInt64]>([])

    private func version(_ version: UInt64, of id: String = "a", producedBy: UInt64, watched: Bool = false) -> QueuedWrite {
        .version(TestVersion(id: id, version: version, producedBy: producedBy, watched: watched, encoded: encoded))
    }

    private func kept(_ writes: [SessionWrite]) -> [String] {
        writes.compactMap { write in
            guard case .version(let id, let version, _, _, _, _) = write else { return nil }
            return "\(id)\(version)"
        }
    }

    /// The writes a batch commits when `queued` is queued in order, each session's with its own
    /// ``QueuedSession``.
    private func committed(_ queued: [QueuedWrite]) -> [SessionWrite] {
        var sessions: [String: QueuedSession] = [:]
        var batch = QueuedBatch(number: 1)
        for write in queued {
            let session = sessions[write.instanceID] ?? QueuedSession()
            sessions[write.instanceID] = session
            batch.append(write, of: session)
        }
        return batch.taken()
    }

    @Test func anUnwatchedSessionKeepsTheLastVersionOfActionsSettledInTheBatch() {
        let batch: [QueuedWrite] = [
            .ready(.accept(id: "a", seq: 1, action: [], key: nil)),
            version(1, producedBy: 1), version(2, producedBy: 1), version(3, of: "b", producedBy: 0),
            version(4, of: "b", producedBy: 0), version(3, producedBy: 1),
            .ready(.settle(id: "a", seq: 1)),
        ]
        let writes = committed(batch)
        #expect(kept(writes) == ["b4", "a3"])
        #expect(encoded.withLock { $0 }.sorted() == [3, 4], "versions left out are never encoded")
        #expect(writes.count == 2, "an action accepted and settled in the batch is not written")
    }

    @Test func versionsOfAnActionNotSettledInTheBatchAreKept() {
        // Action 2 is still running when the batch is taken: a restart tells the recovery hook
        // how many of its mutations were reduced by counting its stored versions.
        let batch: [QueuedWrite] = [
            version(1, producedBy: 1), version(2, producedBy: 2), version(3, producedBy: 2), version(4, producedBy: 2),
            .ready(.settle(id: "a", seq: 1)),
        ]
        #expect(kept(committed(batch)) == ["a2", "a3", "a4"])
    }

    @Test func versionsOfAnActionAreLeftOutOnceItSettlesLaterInTheBatch() {
        let batch: [QueuedWrite] = [
            .ready(.accept(id: "a", seq: 1, action: [], key: nil)),
            version(1, producedBy: 1), version(2, producedBy: 1), version(3, producedBy: 1),
            .ready(.settle(id: "a", seq: 1)),
            .ready(.accept(id: "a", seq: 2, action: [], key: nil)),
            version(4, producedBy: 2), version(5, producedBy: 2),
        ]
        let writes = committed(batch)
        #expect(kept(writes) == ["a4", "a5"], "action 1's last version is left out once a later one follows")
        #expect(writes.count == 3, "action 2's record is kept: it has not settled")
        guard case .accept(_, let seq, _, _) = writes.first else {
            Issue.record("expected action 2's record first, got \(writes)")
            return
        }
        #expect(seq == 2)
    }

    @Test func anActionSentWithAnIdempotencyKeyKeepsItsRecordForTheStore() {
        let key = RememberedKey(key: "k", seq: 1, digest: 7)
        let batch: [QueuedWrite] = [
            .ready(.accept(id: "a", seq: 1, action: [], key: key)), version(1, producedBy: 1),
            .ready(.settle(id: "a", seq: 1)),
        ]
        #expect(committed(batch).count == 3, "the store keeps the key past the settle")
    }

    @Test func writesQueuedWithoutTheirSessionAreAllKept() {
        var batch = QueuedBatch(number: 1)
        batch.append(.ready(.accept(id: "a", seq: 1, action: [], key: nil)), of: nil)
        batch.append(version(1, producedBy: 1), of: nil)
        batch.append(version(2, producedBy: 1), of: nil)
        batch.append(.ready(.settle(id: "a", seq: 1)), of: nil)
        #expect(batch.taken().count == 4)
    }

    @Test func aSessionForgetsWhatItKnewOfAnEarlierBatch() {
        let session = QueuedSession()
        var first = QueuedBatch(number: 1)
        first.append(.ready(.accept(id: "a", seq: 1, action: [], key: nil)), of: session)
        first.append(version(1, producedBy: 1), of: session)
        var second = QueuedBatch(number: 2)
        second.append(version(2, producedBy: 1), of: session)
        second.append(.ready(.settle(id: "a", seq: 1)), of: session)
        #expect(first.taken().count == 2)
        #expect(second.taken().count == 2, "the settle of an action accepted in an earlier batch is written")
    }

    @Test func aWatchedSessionKeepsEveryVersion() {
        let batch: [QueuedWrite] = [
            version(1, producedBy: 1, watched: true), version(2, producedBy: 1, watched: true),
            .ready(.settle(id: "a", seq: 1)),
        ]
        #expect(kept(committed(batch)) == ["a1", "a2"])
    }

    @Test func writesOfDroppedSessionsAreLeftOut() {
        let session = QueuedSession()
        var batch = QueuedBatch(number: 1)
        batch.append(.ready(.accept(id: "a", seq: 1, action: [], key: nil)), of: session)
        batch.append(version(1, of: "b", producedBy: 0), of: nil)
        batch.leaveOut(["a"])
        batch.append(.ready(.settle(id: "a", seq: 1)), of: session)
        #expect(kept(batch.taken()) == ["b1"])
        #expect(batch.taken().count == 1)
    }

    private func accept(_ seq: UInt64, of id: String = "a", key: RememberedKey? = nil) -> QueuedWrite {
        .ready(.accept(id: id, seq: seq, action: [], key: key))
    }

    private func records(_ writes: [SessionWrite]) -> [UInt64] {
        writes.compactMap { write in
            guard case .accept(_, let seq, _, _) = write else { return nil }
            return seq
        }
    }

    @Test func aRecentRecordOfAnActionInFlightWaitsForTheNextBatchAndIsNeverWrittenOnceItSettlesThere() {
        let session = QueuedSession()
        var first = QueuedBatch(number: 1)
        first.append(accept(1), of: session, carryableSince: 100)
        first.append(version(1, producedBy: 1), of: session)
        first.append(.ready(.settle(id: "a", seq: 1)), of: session)
        first.append(accept(2), of: session, carryableSince: 200)
        first.append(accept(3), of: session, carryableSince: 300)
        var second = QueuedBatch(number: 2)
        #expect(first.carryOver(queuedSince: 150, into: &second) == 200, "when the oldest record carried was queued")
        #expect(records(first.taken()) == [], "actions 2 and 3 wait")
        #expect(kept(first.taken()) == ["a1"])
        second.append(version(2, producedBy: 2), of: session)
        second.append(.ready(.settle(id: "a", seq: 2)), of: session)
        #expect(records(second.taken()) == [3], "action 2 settled in the batch it waited for; action 3 is still in flight")
        #expect(kept(second.taken()) == ["a2"])
    }

    @Test func aRecordIsWrittenInItsOwnBatchWhenItsActionHadStartedOrItMustNotWait() {
        let session = QueuedSession()
        var first = QueuedBatch(number: 1)
        first.append(accept(1), of: session, carryableSince: 100)
        first.append(version(1, producedBy: 1), of: session)
        first.append(accept(2), of: session, carryableSince: 50)
        first.append(accept(3), of: session)
        first.append(accept(4, key: RememberedKey(key: "k", seq: 4, digest: 7)), of: session, carryableSince: 100)
        first.append(accept(5), of: session, carryableSince: 100)
        first.append(version(2, producedBy: 1), of: session)
        first.append(version(3, producedBy: 5), of: session)
        var second = QueuedBatch(number: 2)
        #expect(first.carryOver(queuedSince: 80, into: &second) == nil)
        // 1 and 5 had started by the batch's last version (made by 5), 2 is older than the
        // bound, 3 was not acknowledged at once, and 4's idempotency key is kept by the store.
        #expect(records(first.taken()) == [1, 2, 3, 4, 5])
        #expect(second.taken().isEmpty)
    }

    @Test func onlyASessionsLastRecordsWaitAfterAnyTheBatchWritesAndAfterWhatHadStarted() {
        let (a, b) = (QueuedSession(), QueuedSession())
        var first = QueuedBatch(number: 1)
        first.append(accept(1), of: a, carryableSince: 100)
        first.append(accept(2, key: RememberedKey(key: "k", seq: 2, digest: 7)), of: a, carryableSince: 100)
        first.append(accept(3), of: a, carryableSince: 100)
        for seq: UInt64 in 11...13 { first.append(accept(seq, of: "b"), of: b, carryableSince: 100) }
        // Made once action 12 had started, though by action 11.
        let version = TestVersion(id: "b", version: 1, producedBy: 11, startedThrough: 12, watched: false, encoded: encoded)
        first.append(.version(version), of: b)
        first.append(accept(14, of: "b"), of: b, carryableSince: 100)
        var second = QueuedBatch(number: 2)
        #expect(first.carryOver(queuedSince: 0, into: &second) == 100)
        // 1 is before 2, written for its key: losing 1 alone to a crash would leave a gap among
        // the unstarted actions activation finds. 11 and 12 had started by b's last version.
        #expect(records(first.taken()) == [1, 2, 11, 12])
        #expect(records(second.taken()) == [3, 13, 14])
    }

    @Test func aBatchWithAWriteQueuedWithoutItsSessionCarriesNothingOver() {
        var first = QueuedBatch(number: 1)
        first.append(accept(1), of: QueuedSession(), carryableSince: 100)
        first.append(.ready(.release(id: "a")), of: nil)
        var second = QueuedBatch(number: 2)
        #expect(first.carryOver(queuedSince: 0, into: &second) == nil)
        #expect(records(first.taken()) == [1], "the release must not be committed before the record")
        #expect(second.isEmpty)
    }

    @Test func aKeptVersionIsEncodedOnceAndItsBytesAreWhatIsShown() throws {
        let (timeline, publisher) = StateTimeline.make(initial: 0, historyCapacity: 8, subscriberLimit: 8)
        let pending = PublishedVersion(
            id: "a", state: 7, origin: VersionOrigin(version: 1, producedBy: 1, publishedAt: nil), startedThrough: 1,
            lastActivity: 1, publisher: publisher)
        #expect(pending.json == nil)
        #expect(!pending.hasReaders)
        var batch = QueuedBatch(number: 1)
        batch.append(.version(pending), of: QueuedSession())
        let taken = batch.taken()
        guard case .version(_, 1, let stored, 1, 1, 1) = taken.first else {
            Issue.record("expected version 1 stored, got \(taken)")
            return
        }
        #expect(stored == Array("7".utf8))
        #expect(pending.json == stored)
        pending.committed(.failed)
        #expect(timeline.latest.version == 0, "a version whose commit failed is never shown")
        pending.committed(.committed)
        #expect(timeline.latest.version == 1)
    }
}

/// A queued version that records when it is encoded.
private final class TestVersion: PendingVersion {
    let id: String
    let version: UInt64
    let startedThrough: UInt64
    let producedBy: UInt64
    let lastActivity: Int64 = 1
    let hasReaders: Bool
    private let encoded: Locked<[UInt64]>

    init(
        id: String, version: UInt64, producedBy: UInt64, startedThrough: UInt64? = nil, watched: Bool,
        encoded: Locked<[UInt64]>
    ) {
        self.id = id
        self.version = version
        self.startedThrough = startedThrough ?? producedBy
        self.producedBy = producedBy
        self.hasReaders = watched
        self.encoded = encoded
    }

    func write() -> SessionWrite {
        encoded.withLock { $0.append(version) }
        return .version(
            id: id, version: version, state: Array("{\"v\":\(version)}".utf8), startedThrough: startedThrough,
            producedBy: producedBy, lastActivity: lastActivity)
    }

    func committed(_ outcome: CommitOutcome) {}
}
