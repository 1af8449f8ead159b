import Locking

/// Records the elements of an async sequence on a task of its own, and lets a test wait until
/// they satisfy a condition (bounded by a timeout that only guards against a hang).
final class Recorder<Element: Sendable>: Sendable {
    private struct State {
        var elements: [Element] = []
        var finished = false
        var watchers: [Int: AsyncStream<Void>.Continuation] = [:]
        var nextWatcher = 0
    }

    private let state = Locked(State())
    private let task = Locked<Task<Void, Never>?>(nil)

    init<Sequence: AsyncSequence & Sendable>(_ sequence: Sequence) where Sequence.Element == Element {
        let state = self.state
        task.withLock { task in
            task = Task {
                do {
                    for try await element in sequence {
                        Self.change(state) { $0.elements.append(element) }
                    }
                } catch {}
                Self.change(state) { $0.finished = true }
            }
        }
    }

    deinit { cancel() }

    /// What was recorded so far.
    var elements: [Element] { state.withLock { $0.elements } }

    /// Stops recording: cancels the task reading the sequence.
    func cancel() {
        task.withLock { $0 }?.cancel()
    }

    /// Waits until `condition` holds for the elements recorded; returns them.
    /// - Throws: when the sequence finished first, or `timeout` passed.
    @discardableResult
    func wait(
        _ what: String, timeout: Duration = .seconds(20),
        until condition: @escaping @Sendable ([Element]) -> Bool
    ) async throws -> [Element] {
        try await watch(what, timeout: timeout) { elements, finished in
            if condition(elements) { return elements }
            if finished { throw TestFailure("the sequence finished before \(what): \(elements)") }
            return nil
        }
    }

    /// Waits until the sequence finishes; returns everything it produced.
    @discardableResult
    func waitForEnd(timeout: Duration = .seconds(20)) async throws -> [Element] {
        try await watch("the end of the sequence", timeout: timeout) { elements, finished in finished ? elements : nil }
    }

    /// Calls `check` with the elements and whether the sequence finished, now and after each
    /// change, until it returns a value.
    private func watch(
        _ what: String, timeout: Duration,
        _ check: @escaping @Sendable ([Element], Bool) throws -> [Element]?
    ) async throws -> [Element] {
        try await within(timeout, what) { [state] in
            let (changes, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
            let id = state.withLock { state in
                state.nextWatcher += 1
                state.watchers[state.nextWatcher] = continuation
                return state.nextWatcher
            }
            defer { _ = state.withLock { $0.watchers.removeValue(forKey: id) } }
            continuation.yield()
            for await _ in changes {
                let (elements, finished) = state.withLock { ($0.elements, $0.finished) }
                if let result = try check(elements, finished) { return result }
            }
            throw CancellationError()
        }
    }

    private static func change(_ state: Locked<State>, _ body: (inout State) -> Void) {
        let watchers = state.withLock { state in
            body(&state)
            return Array(state.watchers.values)
        }
        for watcher in watchers { watcher.yield() }
    }
}
