import Locking
import Synchronization

/// State shared by the server object and libmicrohttpd's callbacks: the handler, the
/// configuration, and what graceful shutdown must wait for.
final class ServerCore: Sendable {
    private struct Registry {
        var streams: [UInt64: HTTPStream] = [:]
        var responders: [ObjectIdentifier: HTTPResponder] = [:]
        var heartbeats: RepeatingThread?
        var memoryTrimmer: Task<Void, Never>?
    }

    let configuration: HTTPServerConfiguration
    let handler: HTTPHandler
    private let shuttingDown = Atomic<Bool>(false)
    private let inFlight = Atomic<Int>(0)
    private let nextStreamID = Atomic<UInt64>(1)
    private let registry = Locked(Registry())

    /// ``HTTPServerConfiguration/deferredReplyHold`` in nanoseconds.
    let replyHoldNanoseconds: UInt64

    init(configuration: HTTPServerConfiguration, handler: @escaping HTTPHandler) {
        self.configuration = configuration
        self.handler = handler
        replyHoldNanoseconds = configuration.deferredReplyHold.nanoseconds
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
        registry.withLock { registry in
            registry.streams[id] = stream
            if heartbeat != nil, registry.heartbeats == nil { registry.heartbeats = Self.startHeartbeats(registry: self.registry) }
        }
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

    // Neither a responder nor the heartbeat thread holds the server weakly: a weak reference gives
    // an object a side table for good, and every retain and release of it then takes the slow
    // path, here for every request. They hold the registry, which lets go of both: a responder
    // when it responds (`HTTPServer.shutdown` answers those left), the thread when stopped.

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

    /// One heartbeat thread per server, started with its first stream that has a heartbeat: each
    /// run looks at every stream with a heartbeat and wakes those idle for their interval, then
    /// sleeps until the earliest next deadline (at most 250 ms, so a newly opened stream is seen in
    /// time); idle streams are neither polled nor resumed in between. A thread of its own, not a
    /// task: a task that blocks Swift's cooperative threads (a handler's or a reactor's blocking
    /// call) would otherwise hold back every stream's heartbeat, and a proxy's idle timeout would
    /// then cut streams the server means to keep. Nil when no thread could be started: the next
    /// stream with a heartbeat tries again.
    private static func startHeartbeats(registry: Locked<Registry>) -> RepeatingThread? {
        var error: Int32 = 0
        return RepeatingThread(named: "rs-heartbeat", firstWait: .zero, error: &error) { _ in
            let now = MonotonicClock.nanoseconds()
            var next = now + 250_000_000
            for stream in registry.withLock({ Array($0.streams.values) }) {
                if let due = stream.heartbeatTick(now: now) { next = min(next, due) }
            }
            return .nanoseconds(Int64(clamping: max(next &- now, 1_000_000)))
        }
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

    /// Stops the heartbeat thread (waiting for it) and the memory trimmer.
    func stopTimers() {
        let (heartbeats, trimmer) = registry.withLock { registry in
            defer {
                registry.heartbeats = nil
                registry.memoryTrimmer = nil
            }
            return (registry.heartbeats, registry.memoryTrimmer)
        }
        heartbeats?.stop()
        trimmer?.cancel()
    }
}
