import Dispatch
import Locking
import Logging
import TestSupport
import Testing

@testable import ReactorHosting

/// Wake-ups held back while a thread runs a batch of work: made once each when it ends, and by
/// the commit thread once for all the completions of a commit.
@Suite struct WakeUpBatchTests {
    @Test func aWakeUpOutsideABatchIsMadeAtOnce() {
        let loop = CountingWakeUp()
        WakeUpBatch.wake(loop)
        WakeUpBatch.wake(loop)
        #expect(loop.count == 2)
    }

    @Test func wakeUpsInsideABatchAreMadeOnceEachWhenTheOutermostBatchEnds() {
        let first = CountingWakeUp()
        let second = CountingWakeUp()
        var seenInside: [Int] = []
        WakeUpBatch.collecting {
            for _ in 0..<3 { WakeUpBatch.wake(first) }
            WakeUpBatch.collecting { WakeUpBatch.wake(second) }
            // The inner batch ended, but not the outer one.
            seenInside = [first.count, second.count]
            WakeUpBatch.wake(second)
        }
        #expect(seenInside == [0, 0])
        #expect(first.count == 1)
        #expect(second.count == 1)
        // The next batch starts empty.
        WakeUpBatch.collecting { WakeUpBatch.wake(first) }
        #expect(first.count == 2)
        #expect(second.count == 1)
    }

    @Test func aCommitsCompletionsWakeEachLoopOnceAfterTheLastOfThem() async throws {
        let firstCommit = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let commits = Locked(0)
        let store = HookedStore(
            InMemorySessionStore(historyCapacity: 4),
            beforeCommit: { _ in
                // The first commit waits, so that the next three writes make one batch.
                if commits.withLock({ count in
                    count += 1
                    return count == 1
                }) {
                    firstCommit.signal()
                    release.wait()
                }
            })
        let committer = GroupCommitter(store: store, durability: .sync, logger: Logger(label: "test"))
        defer { committer.stop() }
        let loop = CountingWakeUp()
        committer.enqueue(.touch(id: "first", lastActivity: 1))
        #expect(await wait(for: firstCommit))
        let seenByCompletions = Locked<[Int]>([])
        for index in 0..<3 {
            committer.enqueue(.touch(id: "session-\(index)", lastActivity: 1)) { outcome in
                #expect(outcome == .committed)
                seenByCompletions.withLock { $0.append(loop.count) }
                WakeUpBatch.wake(loop)
            }
        }
        release.signal()
        #expect(await wait(for: loop.woken))
        // Each completion asked for a wake-up; none was made until the last had run, then one.
        #expect(seenByCompletions.withLock { $0 } == [0, 0, 0])
        #expect(loop.count == 1)
        #expect(commits.withLock { $0 } == 2)
    }
}

/// Counts the wake-ups made, and signals each.
private final class CountingWakeUp: BatchableWakeUp, Sendable {
    private let made = Locked(0)
    let woken = DispatchSemaphore(value: 0)

    var count: Int { made.withLock { $0 } }

    func wakeNow() {
        made.withLock { $0 += 1 }
        woken.signal()
    }
}
