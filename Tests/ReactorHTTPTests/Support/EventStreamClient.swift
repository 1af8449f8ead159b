import Foundation
import Locking
import ProcessSpawning
import ReactorClient

/// What the tests read off a server-sent event (the event and its parser are the Swift client's).
extension ServerSentEvent {
    var version: UInt64? { id.flatMap(UInt64.init) }

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any] ?? [:]
    }
}

/// An event-stream subscriber: `curl -N` reading the stream, its output parsed as SSE.
final class EventStreamClient: Sendable {
    private let process: SpawnedProcess
    private let received = Locked(Received())

    private struct Waiter {
        let id: Int
        let condition: @Sendable ([ServerSentEvent]) -> Bool
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct Received {
        var events: [ServerSentEvent] = []
        var retry: Int?
        var finished = false
        var waiters: [Waiter] = []
        var nextWaiter = 0

        /// Removes and returns the waiters whose condition now holds (all once finished).
        mutating func satisfiedWaiters() -> [Waiter] {
            let ready = waiters.filter { finished || $0.condition(events) }
            waiters.removeAll { waiter in ready.contains { $0.id == waiter.id } }
            return ready
        }
    }

    init(url: String, headers: [String: String] = [:]) throws {
        var arguments = ["-sN", "--no-buffer", "-H", "Accept: text/event-stream"]
        for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
        let process = try SpawnedProcess(executable: "/usr/bin/curl", arguments: arguments + [url])
        self.process = process
        let received = self.received
        Thread.detachNewThread {
            var parser = ServerSentEventParser()
            while true {
                let bytes = process.readOutput()
                let events = parser.feed(bytes)
                let ready = received.withLock { state in
                    state.events += events
                    state.retry = parser.retryMilliseconds
                    if bytes.isEmpty { state.finished = true }
                    return state.satisfiedWaiters()
                }
                ready.forEach { $0.continuation.resume() }
                if bytes.isEmpty { break }
            }
        }
    }

    /// Everything received so far.
    var events: [ServerSentEvent] { received.withLock { $0.events } }
    var retry: Int? { received.withLock { $0.retry } }
    var isFinished: Bool { received.withLock { $0.finished } }

    /// Waits until `condition` holds on the events received, or the stream ends, or `timeout`
    /// passes (a failure guard only, never the expected path). Returns the events received.
    @discardableResult
    func wait(
        timeout: Duration = .seconds(20),
        until condition: @escaping @Sendable ([ServerSentEvent]) -> Bool
    ) async -> [ServerSentEvent] {
        let received = self.received
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let id: Int? = received.withLock { state in
                if state.finished || condition(state.events) { return nil }
                state.nextWaiter += 1
                state.waiters.append(Waiter(id: state.nextWaiter, condition: condition, continuation: continuation))
                return state.nextWaiter
            }
            guard let id else { return continuation.resume() }
            Task {
                try? await Task.sleep(for: timeout)
                let expired = received.withLock { state -> Waiter? in
                    guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return state.waiters.remove(at: index)
                }
                expired?.continuation.resume()
            }
        }
        return events
    }

    /// Waits until the stream ends (the server closed it), bounded by `timeout`.
    func waitForEnd(timeout: Duration = .seconds(20)) async -> [ServerSentEvent] {
        await wait(timeout: timeout) { _ in false }
    }

    /// Stops curl by its PID and waits for it.
    func stop() {
        process.signal(SIGTERM)
        process.waitForExit()
    }

    /// Returns once the stream at `url` has delivered `version`, reading it on a stream of its
    /// own. A `202` means queued, so a test that reads the state after POSTing waits here first.
    static func waitUntilPublished(_ version: UInt64, url: String) async throws {
        let stream = try EventStreamClient(url: url)
        await stream.wait { $0.last?.version == version }
        stream.stop()
    }

    deinit { stop() }
}
