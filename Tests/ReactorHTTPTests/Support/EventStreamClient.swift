import Foundation
import Locking
import ProcessSpawning

/// One server-sent event as a client sees it.
struct ServerSentEvent: Sendable, Equatable {
    var id: String?
    var event: String = "message"
    var data: String = ""

    var version: UInt64? { id.flatMap(UInt64.init) }

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any] ?? [:]
    }
}

/// Parses the `text/event-stream` format line by line (WHATWG HTML §9.2.6).
struct EventStreamParser {
    private var buffer: [UInt8] = []
    private var current = ServerSentEvent()
    private var dataLines: [String] = []
    private(set) var comments: [String] = []
    private(set) var retry: Int?

    mutating func feed(_ bytes: some Sequence<UInt8>) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            if byte == 0x0A {
                var line = buffer
                if line.last == 0x0D { line.removeLast() }
                buffer.removeAll(keepingCapacity: true)
                if let event = process(String(decoding: line, as: UTF8.self)) { events.append(event) }
            } else {
                buffer.append(byte)
            }
        }
        return events
    }

    private mutating func process(_ line: String) -> ServerSentEvent? {
        if line.isEmpty {
            defer { current = ServerSentEvent(); dataLines = [] }
            guard !dataLines.isEmpty else { return nil }
            current.data = dataLines.joined(separator: "\n")
            return current
        }
        if line.hasPrefix(":") {
            comments.append(String(line.dropFirst()).trimmingCharacters(in: .whitespaces))
            return nil
        }
        let field: Substring
        var value: Substring
        if let colon = line.firstIndex(of: ":") {
            field = line[..<colon]
            value = line[line.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
        } else {
            field = line[...]
            value = ""
        }
        switch field {
        case "id": current.id = String(value)
        case "event": current.event = String(value)
        case "data": dataLines.append(String(value))
        case "retry": retry = Int(value)
        default: break
        }
        return nil
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
        var comments: [String] = []
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
            var parser = EventStreamParser()
            while true {
                let bytes = process.readOutput()
                let events = parser.feed(bytes)
                let ready = received.withLock { state in
                    state.events += events
                    state.comments = parser.comments
                    state.retry = parser.retry
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
    var comments: [String] { received.withLock { $0.comments } }
    var retry: Int? { received.withLock { $0.retry } }
    var isFinished: Bool { received.withLock { $0.finished } }

    /// Waits until `condition` holds on the events received, or the stream ends, or `timeout`
    /// passes (a failure guard only, never the expected path). Returns the events received.
    @discardableResult
    func wait(timeout: Duration = .seconds(20),
              until condition: @escaping @Sendable ([ServerSentEvent]) -> Bool) async -> [ServerSentEvent] {
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
