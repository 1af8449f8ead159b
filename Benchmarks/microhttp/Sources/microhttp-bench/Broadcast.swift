import Glibc
import MicroHTTP
import Synchronization

/// Idle-streams benchmark: every subscriber gets the monotonic time every 100 ms, encoded once
/// per tick and shared by all subscribers.
enum Broadcast {
    private static let subscribers = Mutex<[HTTPBufferedStreamSource]>([])

    @Sendable static func handle(_ request: HTTPRequest) -> HTTPResponse {
        guard request.path == "/events" else { return Bench.handle(request) }
        let source = HTTPBufferedStreamSource(capacity: 8, overflow: .conflate)
        subscribers.withLock { $0.append(source) }
        return .stream(headers: ["Content-Type": "text/event-stream"], source: source,
                       heartbeat: HTTPHeartbeat(interval: .seconds(15), bytes: Array(": ping\n\n".utf8)))
    }

    static func startTicking() {
        Thread.detach {
            while true {
                usleep(100_000)
                var now = timespec()
                clock_gettime(CLOCK_MONOTONIC, &now)
                let message = Array("data: \(Int(now.tv_sec) * 1_000_000_000 + now.tv_nsec)\n\n".utf8)
                let open = subscribers.withLock { list -> [HTTPBufferedStreamSource] in
                    list.removeAll { $0.isClosed }
                    return list
                }
                for source in open { source.write(message) }
            }
        }
    }
}

/// A plain POSIX thread for the ticker (kept off Swift's cooperative pool).
enum Thread {
    static func detach(_ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        pthread_create(&thread, nil, { pointer in
            let box = Unmanaged<Box>.fromOpaque(pointer!).takeRetainedValue()
            box.body()
            return nil
        }, box)
        pthread_detach(thread)
    }

    private final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
}
