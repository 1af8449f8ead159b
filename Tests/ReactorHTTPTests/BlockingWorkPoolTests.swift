import Dispatch
import Foundation
import Locking
import Synchronization
import Testing

@testable import ReactorHTTP

@Suite struct BlockingWorkPoolTests {
    /// A job that records that it ran, then blocks until released.
    final class Gate: Sendable {
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)

        func job() -> @Sendable () -> Void {
            { [self] in
                started.signal()
                release.wait()
                finished.signal()
            }
        }
    }

    @Test func runsAsManyJobsAtOnceAsItHasThreadsAndTheRestInTurn() {
        let pool = BlockingWorkPool(maxThreads: 2, maxQueued: 8)
        let gates = (0..<3).map { _ in Gate() }
        let refused = Atomic<Int>(0)
        for gate in gates { pool.submit(gate.job(), refuse: { refused.add(1, ordering: .relaxed) }) }
        #expect(gates[0].started.wait(timeout: .now() + 10) == .success)
        #expect(gates[1].started.wait(timeout: .now() + 10) == .success)
        // Both threads are busy: the third waits for one of them.
        #expect(gates[2].started.wait(timeout: .now() + 0.2) == .timedOut)
        #expect(pool.threadCount == 2)
        #expect(pool.pending == 3)
        gates[0].release.signal()
        #expect(gates[2].started.wait(timeout: .now() + 10) == .success)
        gates[1].release.signal()
        gates[2].release.signal()
        for gate in gates { #expect(gate.finished.wait(timeout: .now() + 10) == .success) }
        #expect(refused.load(ordering: .relaxed) == 0)
    }

    @Test func refusesAJobAtOnceWhenTheQueueIsFull() {
        let pool = BlockingWorkPool(maxThreads: 1, maxQueued: 1)
        let running = Gate()
        let queued = Gate()
        pool.submit(running.job(), refuse: { Issue.record("the running job was refused") })
        #expect(running.started.wait(timeout: .now() + 10) == .success)
        pool.submit(queued.job(), refuse: { Issue.record("the queued job was refused") })
        let refusedOnCaller = Locked(false)
        pool.submit({ Issue.record("a job past the queue's limit ran") }, refuse: { refusedOnCaller.withLock { $0 = true } })
        // Refused on the submitting thread, before `submit` returned.
        #expect(refusedOnCaller.withLock { $0 })
        running.release.signal()
        queued.release.signal()
        #expect(queued.finished.wait(timeout: .now() + 10) == .success)
    }

    @Test func refusesAJobThatWaitedLongerThanItsLimit() {
        let clock = Atomic<UInt64>(0)
        let pool = BlockingWorkPool(
            maxThreads: 1, maxQueued: 4, maxQueueWait: .seconds(5),
            now: { clock.load(ordering: .relaxed) })
        let running = Gate()
        pool.submit(running.job(), refuse: { Issue.record("the running job was refused") })
        #expect(running.started.wait(timeout: .now() + 10) == .success)
        let answered = DispatchSemaphore(value: 0)
        let outcome = Locked<String?>(nil)
        pool.submit(
            {
                outcome.withLock { $0 = "ran" }
                answered.signal()
            },
            refuse: {
                outcome.withLock { $0 = "refused" }
                answered.signal()
            })
        clock.store(5_000_000_001, ordering: .relaxed)
        running.release.signal()
        #expect(answered.wait(timeout: .now() + 10) == .success)
        #expect(outcome.withLock { $0 } == "refused")
        // A job that waited no longer than the limit runs.
        let later = DispatchSemaphore(value: 0)
        pool.submit({ later.signal() }, refuse: { Issue.record("a fresh job was refused") })
        #expect(later.wait(timeout: .now() + 10) == .success)
    }

    @Test func threadsLeaveWhenIdleAndComeBackForNewWork() {
        let pool = BlockingWorkPool(maxThreads: 4, idleLinger: .milliseconds(20))
        let done = DispatchSemaphore(value: 0)
        for _ in 0..<4 { pool.submit({ done.signal() }, refuse: {}) }
        for _ in 0..<4 { #expect(done.wait(timeout: .now() + 10) == .success) }
        #expect(waitUntil { pool.threadCount == 0 }, "idle threads stayed")
        pool.submit({ done.signal() }, refuse: { Issue.record("refused") })
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(waitUntil { pool.threadCount == 0 }, "the new thread stayed")
        #expect(pool.pending == 0)
    }

    /// Polls `condition` until it holds or 10 s pass.
    private func waitUntil(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while !condition() {
            if Date() > deadline { return false }
            usleep(1_000)
        }
        return true
    }
}
