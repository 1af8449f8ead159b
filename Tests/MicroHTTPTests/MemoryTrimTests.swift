import Glibc
import Testing

@testable import MicroHTTP

@Suite struct MemoryTrimTests {
    @Test func aQuickLookKeepsTheShortestWait() {
        #expect(MemoryTrim.wait(afterLookTaking: .zero) == MemoryTrim.period)
        #expect(MemoryTrim.wait(afterLookTaking: .microseconds(300)) == MemoryTrim.period)
    }

    @Test func aSlowLookSpacesTheNextOneByItsCost() {
        // 10 ms walking a large heap: the next look waits 500 times as long.
        #expect(MemoryTrim.wait(afterLookTaking: .milliseconds(10)) == .seconds(5))
    }

    @Test func theWaitIsCapped() {
        #expect(MemoryTrim.wait(afterLookTaking: .seconds(1)) == MemoryTrim.longestPeriod)
    }

    @Test func theCostOfALookIsTheCPUTimeItsThreadSpent() {
        // Asleep, a thread spends (almost) no CPU time, however long the wall clock says it took:
        // a look preempted on a busy machine is not counted as a costly one.
        let before = MemoryTrim.threadCPUTime()
        usleep(200_000)
        let asleep = MemoryTrim.threadCPUTime() - before
        #expect(asleep < .milliseconds(20), "CPU time while asleep: \(asleep)")
        // Busy, it spends CPU time (bounded by the wall clock, should the clock not advance).
        let busyStart = MemoryTrim.threadCPUTime()
        let deadline = ContinuousClock.now + .seconds(10)
        while MemoryTrim.threadCPUTime() - busyStart < .milliseconds(30), ContinuousClock.now < deadline {}
        #expect(MemoryTrim.threadCPUTime() - busyStart >= .milliseconds(30))
    }

    @Test func aLookReportsAWaitWithinTheBounds() {
        let wait = MemoryTrim.look()
        #expect(wait >= MemoryTrim.period && wait <= MemoryTrim.longestPeriod)
    }
}
