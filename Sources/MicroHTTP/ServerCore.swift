import Locking
import Synchronization

/// State shared by the server object and libmicrohttpd's callbacks: the handler, the
/// configuration, and what graceful shutdown must wait for.
final class ServerCore: Sendable {
    private struct Registry {
        var streams: [UInt64: HTTPStream] = [:]
        var responders: [ObjectIdentifier: HTTPResponder] = [:]
        var heartbeatTimer: Task<Void, Never>?
        var memoryTrimmer: Task<Void, Never>?
    }

    let configuration: HTTPServerConfiguration
    let handler: HTTPHandler
    private let shuttingDown = Atomic<Bool>(false)
    private let inFlight = Atomic<Int>(0)
    private let nextStreamID = Atomic<UInt64>(1)
    private let registry = Locked(Registry())

    init(configuration: HTTPServerConfiguration, handler: @escaping HTTPHandler) {
        self.configuration = configuration
        self.handler = handler
    }

    var isShuttingDown: Bool { shuttingDown.load(ordering: .relaxed) }
    var inFlightRequests: Int { inFlight.load(ordering: .acquiring) }

    func requestStarted() { inFlight.add(1, ordering: .relaxed) }
    func requestFinished() { inFlight.subtract(1, ordering: .releasing) }

    // MARK: Streams

    /// A stream on `connection`, whose `socket` (or -1) goes in `hangUps`; from the loop thread.
    func makeStream(
        source: any HTTPStreamSource, heartbeat: HTTPHeartbeat?, connection: ConnectionHandle, hangUps: HangUpWatch, socket: Int32
    ) -> HTTPStream {
        let id = nextStreamID.add(1, ordering: .relaxed).oldValue
        let stream = HTTPStream(
            id: id, source: source, heartbeat: heartbeat, connection: connection, server: self, hangUps: hangUps, socket: socket)
        let startTimer = registry.withLock { registry -> Bool in
            registry.streams[id] = stream
            return heartbeat != nil && registry.heartbeatTimer == nil
        }
        if startTimer { startHeartbeatTimer() }
        return stream
    }

    func streamClosed(_ stream: HTTPStream, reason: HTTPStreamCloseReason) {
        _ = registry.withLock { $0.streams.removeValue(forKey: stream.id) }
        stream.close(reason: reason)
    }

    var openStreams: [HTTPStream] { registry.withLock { Array($0.streams.values) } }

    /// The open stream numbered `id`, if any.
    func stream(_ id: UInt64) -> HTTPStream? { registry.withLock { $0.streams[id] } }

    // MARK: Deferred replies

    // Neither a responder nor the heartbeat timer holds the server weakly: a weak reference gives
    // an object a side table for good, and every retain and release of it then takes the slow
    // path, here for every request. They hold the registry, which lets go of both: a responder
    // when it responds (`HTTPServer.shutdown` answers those left), the timer when stopped.

    func makeResponder(connection: ConnectionHandle) -> HTTPResponder {
        let registry = self.registry
        let responder = HTTPResponder(connection: connection) { responder in
            _ = registry.withLock { $0.responders.removeValue(forKey: ObjectIdentifier(responder)) }
        }
        registry.withLock { $0.responders[ObjectIdentifier(responder)] = responder }
        return responder
    }

    var pendingResponders: [HTTPResponder] { registry.withLock { Array($0.responders.values) } }

    // MARK: Heartbeats

    /// One timer per server: each tick looks at every stream with a heartbeat and wakes those idle
    /// for their interval. It sleeps until the earliest next deadline (at most 250 ms, so a newly
    /// opened stream is seen in time); idle streams are neither polled nor resumed in between.
    private func startHeartbeatTimer() {
        let registry = self.registry
        let task = Task.detached {
            while !Task.isCancelled {
                let now = MonotonicClock.nanoseconds()
                var next = now + 250_000_000
                for stream in registry.withLock({ Array($0.streams.values) }) {
                    if let due = stream.heartbeatTick(now: now) { next = min(next, due) }
                }
                let wait = max(next &- now, 1_000_000)
                try? await Task.sleep(for: .nanoseconds(Int64(clamping: wait)))
            }
        }
        let extra = registry.withLock { registry -> Task<Void, Never>? in
            if registry.heartbeatTimer == nil {
                registry.heartbeatTimer = task
                return nil
            }
            return task
        }
        extra?.cancel()
    }

    // MARK: Memory

    /// Starts the periodic ``MemoryTrim`` check (once per server), spaced as ``MemoryTrim/look()`` says.
    func startMemoryTrimmer() {
        let task = Task.detached(priority: .utility) {
            var wait = MemoryTrim.period
            while !Task.isCancelled {
                do { try await Task.sleep(for: wait) } catch { return }
                wait = MemoryTrim.look()
            }
        }
        let previous = registry.withLock { registry -> Task<Void, Never>? in
            defer { registry.memoryTrimmer = task }
            return registry.memoryTrimmer
        }
        previous?.cancel()
    }

    // MARK: Shutdown

    /// Marks the server as shutting down and wakes every stream so that sources see it.
    func beginShutdown() {
        shuttingDown.store(true, ordering: .sequentiallyConsistent)
        for stream in openStreams { stream.wake() }
    }

    func stopHeartbeatTimer() {
        let timers = registry.withLock { registry -> [Task<Void, Never>] in
            defer {
                registry.heartbeatTimer = nil
                registry.memoryTrimmer = nil
            }
            return [registry.heartbeatTimer, registry.memoryTrimmer].compactMap { $0 }
        }
        timers.forEach { $0.cancel() }
    }
}
