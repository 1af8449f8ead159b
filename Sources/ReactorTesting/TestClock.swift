import Locking
import ReactorCore

/// A clock whose time moves only when a test calls ``advance(by:)``; nothing really sleeps.
///
/// ```swift
/// let clock = TestClock()
/// let reactor = CounterReactor(delay: .milliseconds(500), clock: clock)
/// let receipt = reactor.send(.increase)
/// await clock.waitForSleepers(1)          // the delay has started
/// clock.advance(by: .milliseconds(500))   // and now it is over
/// await reactor.settled(receipt)
/// ```
public final class TestClock: Clock, Sendable {
    /// A point on a ``TestClock``: the time since the clock was created.
    public struct Instant: InstantProtocol, Hashable, Sendable {
        /// Time since the clock's start.
        public var offset: Duration

        /// An instant `offset` after the clock's start.
        public init(offset: Duration = .zero) { self.offset = offset }

        /// The instant `duration` later.
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        /// The time from this instant to `other`.
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        /// Whether `lhs` comes before `rhs`.
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct SleeperWaiter {
        let count: Int
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct Timeline {
        var now = Instant()
        var nextID: UInt64 = 0
        var sleepers: [UInt64: Sleeper] = [:]
        var waiters: [SleeperWaiter] = []

        mutating func dueWaiters() -> [CheckedContinuation<Void, Never>] {
            let due = waiters.filter { $0.count <= sleepers.count }
            waiters.removeAll { $0.count <= sleepers.count }
            return due.map(\.continuation)
        }
    }

    private let timeline = Locked(Timeline())

    /// A clock at its start, with no sleepers.
    public init() {}

    /// The clock's current time.
    public var now: Instant { timeline.withLock { $0.now } }

    /// Zero: the clock has no resolution limit.
    public var minimumResolution: Duration { .zero }

    /// How many tasks are sleeping on this clock right now.
    public var sleeperCount: Int { timeline.withLock { $0.sleepers.count } }

    /// Suspends until ``advance(by:)`` reaches `deadline`, or throws `CancellationError` when
    /// the task is cancelled first.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = timeline.withLock { timeline -> UInt64 in
            timeline.nextID += 1
            return timeline.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (resumeNow, waiters) = timeline.withLock { timeline -> (Bool, [CheckedContinuation<Void, Never>]) in
                    if deadline <= timeline.now { return (true, []) }
                    timeline.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return (false, timeline.dueWaiters())
                }
                if resumeNow { continuation.resume() }
                for waiter in waiters { waiter.resume() }
                if Task.isCancelled { wakeCancelled(id) }
            }
        } onCancel: {
            wakeCancelled(id)
        }
    }

    private func wakeCancelled(_ id: UInt64) {
        let sleeper = timeline.withLock { $0.sleepers.removeValue(forKey: id) }
        sleeper?.continuation.resume(throwing: CancellationError())
    }

    /// Moves time forward by `duration` and wakes, in deadline order, every sleeper now due.
    /// The woken tasks continue asynchronously; await their effects (for example with
    /// `Reactor.settled(_:)`).
    public func advance(by duration: Duration = .zero) {
        let due = timeline.withLock { timeline -> [Sleeper] in
            timeline.now = timeline.now.advanced(by: duration)
            let now = timeline.now
            let due = timeline.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { timeline.sleepers[id] = nil }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Returns once at least `count` tasks are sleeping on this clock.
    public func waitForSleepers(_ count: Int = 1) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = timeline.withLock { timeline -> Bool in
                if timeline.sleepers.count >= count { return true }
                timeline.waiters.append(SleeperWaiter(count: count, continuation: continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }
}
