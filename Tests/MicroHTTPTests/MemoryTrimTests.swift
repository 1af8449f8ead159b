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

    @Test func aLookReportsAWaitWithinTheBounds() {
        let wait = MemoryTrim.look()
        #expect(wait >= MemoryTrim.period && wait <= MemoryTrim.longestPeriod)
    }
}
