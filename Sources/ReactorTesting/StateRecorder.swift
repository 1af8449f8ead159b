import Locking
import ReactorCore

/// Records every state a reactor publishes, from the state current when recording starts.
///
/// ```swift
/// let recorder = StateRecorder(reactor)
/// let receipt = reactor.send(.increase)
/// await reactor.settled(receipt)
/// #expect(recorder.states.map(\.isLoading) == [false, true, true, false, false])
/// ```
public final class StateRecorder<State: Sendable>: Sendable {
    private struct Waiter {
        let isSatisfied: @Sendable ([StateUpdate<State>]) -> Bool
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct Record {
        var updates: [StateUpdate<State>] = []
        var waiters: [UInt64: Waiter] = [:]
        var nextWaiterID: UInt64 = 0

        mutating func dueWaiters() -> [CheckedContinuation<Bool, Never>] {
            let due = waiters.filter { $0.value.isSatisfied(updates) }
            for id in due.keys { waiters[id] = nil }
            return due.values.map(\.continuation)
        }
    }

    private let record = Locked(Record())
    private let token = Locked<ObservationToken?>(nil)

    /// Starts recording `reactor`'s states (the first recorded one is its current state).
    public init<R: Reactor>(_ reactor: R) where R.State == State {
        let observation = reactor.observe { [weak self] update in self?.append(update) }
        token.withLock { $0 = observation }
    }

    private func append(_ update: StateUpdate<State>) {
        let due = record.withLock { record in
            record.updates.append(update)
            return record.dueWaiters()
        }
        for continuation in due { continuation.resume(returning: true) }
    }

    /// The recorded states, in order.
    public var states: [State] { record.withLock { $0.updates.map(\.state) } }

    /// The recorded states with their versions, in order.
    public var updates: [StateUpdate<State>] { record.withLock { $0.updates } }

    /// Stops recording.
    public func stop() { token.withLock { $0?.cancel() } }

    /// Returns true once `isSatisfied` holds for the recorded states, or false after `timeout`
    /// (a safety net so a broken test fails instead of hanging, not a way to wait for work).
    @discardableResult
    public func wait(
        timeout: Duration = .seconds(10),
        until isSatisfied: @escaping @Sendable ([State]) -> Bool
    ) async -> Bool {
        let id = record.withLock { record -> UInt64 in
            record.nextWaiterID += 1
            return record.nextWaiterID
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            let waiter = record.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.continuation.resume(returning: false)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            let satisfied = record.withLock { record -> Bool in
                if isSatisfied(record.updates.map(\.state)) { return true }
                record.waiters[id] = Waiter(isSatisfied: { isSatisfied($0.map(\.state)) }, continuation: continuation)
                return false
            }
            if satisfied { continuation.resume(returning: true) }
        }
    }

    /// Returns true once at least `count` states are recorded (false after `timeout`).
    @discardableResult
    public func wait(forCount count: Int, timeout: Duration = .seconds(10)) async -> Bool {
        await wait(timeout: timeout) { $0.count >= count }
    }
}
