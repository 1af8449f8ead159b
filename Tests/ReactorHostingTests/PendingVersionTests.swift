import Locking
import Testing

@testable import ReactorHosting

/// Which versions a batch keeps: a session's last always; the ones before it while the session
/// has readers, or while the action that produced them has not settled (a restart counts them
/// for the recovery hook); the rest are left out, and never encoded.
@Suite struct PendingVersionTests {
    private let encoded = Locked<[UInt64]>([])

    private func version(_ version: UInt64, of id: String = "a", producedBy: UInt64, watched: Bool = false) -> QueuedWrite {
        .version(
            PendingVersion(
                id: id, version: version, startedThrough: producedBy, producedBy: producedBy, lastActivity: 1,
                encode: { [encoded] in
                    encoded.withLock { $0.append(version) }
                    return Array("{\"v\":\(version)}".utf8)
                }, isWatched: { watched }))
    }

    private func kept(_ writes: [SessionWrite]) -> [String] {
        writes.compactMap { write in
            guard case .version(let id, let version, _, _, _, _) = write else { return nil }
            return "\(id)\(version)"
        }
    }

    @Test func anUnwatchedSessionKeepsTheLastVersionOfActionsSettledInTheBatch() {
        let batch: [QueuedWrite] = [
            .ready(.accept(id: "a", seq: 1, action: [], key: nil)),
            version(1, producedBy: 1), version(2, producedBy: 1), version(3, of: "b", producedBy: 0),
            version(4, of: "b", producedBy: 0), version(3, producedBy: 1),
            .ready(.settle(id: "a", seq: 1)),
        ]
        let writes = QueuedWrite.writes(of: batch)
        #expect(kept(writes) == ["b4", "a3"])
        #expect(encoded.withLock { $0 }.sorted() == [3, 4], "versions left out are never encoded")
        #expect(writes.count == 4)
    }

    @Test func versionsOfAnActionNotSettledInTheBatchAreKept() {
        // Action 2 is still running when the batch is taken: a restart tells the recovery hook
        // how many of its mutations were reduced by counting its stored versions.
        let batch: [QueuedWrite] = [
            version(1, producedBy: 1), version(2, producedBy: 2), version(3, producedBy: 2), version(4, producedBy: 2),
            .ready(.settle(id: "a", seq: 1)),
        ]
        #expect(kept(QueuedWrite.writes(of: batch)) == ["a2", "a3", "a4"])
    }

    @Test func aWatchedSessionKeepsEveryVersion() {
        let batch: [QueuedWrite] = [
            version(1, producedBy: 1, watched: true), version(2, producedBy: 1, watched: true),
            .ready(.settle(id: "a", seq: 1)),
        ]
        #expect(kept(QueuedWrite.writes(of: batch)) == ["a1", "a2"])
    }

    @Test func aKeptVersionIsEncodedOnceAndItsBytesAreWhatIsSent() throws {
        let pending = PendingVersion(
            id: "a", version: 7, startedThrough: 1, producedBy: 1, lastActivity: 1,
            encode: { [encoded] in
                encoded.withLock { $0.append(7) }
                return Array("{}".utf8)
            }, isWatched: { false })
        #expect(pending.json == nil)
        _ = QueuedWrite.writes(of: [.version(pending)])
        #expect(pending.json == Array("{}".utf8))
        _ = pending.write()
        #expect(encoded.withLock { $0 } == [7])
    }
}
