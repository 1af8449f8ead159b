import CMicroHTTPD
import Glibc
import Locking

/// Handles one request; runs synchronously on a server thread (return `.deferred`/`.async` to wait).
public typealias HTTPHandler = @Sendable (HTTPRequest) -> HTTPResponse

/// An HTTP/1.1 server over libmicrohttpd.
///
/// Threading: `threads` event loops, each a libmicrohttpd daemon in external epoll mode
/// (`MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME`) run by a thread of its own, all accepting from one
/// listen socket. Handlers run on those threads; streams and deferred replies suspend their
/// connection, which then costs its loop nothing until it is resumed. With epoll, a loop's work
/// at each wake-up follows the connections that are ready, not all that are open, so idle
/// keep-alive connections cost nothing either.
public final class HTTPServer: Sendable {
    private enum Phase {
        case idle
        case running(Daemons, port: UInt16)
        case stopped
    }

    private let core: ServerCore
    private let phase = Locked(Phase.idle)

    /// A server that answers every request with `handler`.
    public init(configuration: HTTPServerConfiguration, handler: @escaping HTTPHandler) {
        core = ServerCore(configuration: configuration, handler: handler)
    }

    /// A server that answers through `router`.
    public convenience init(configuration: HTTPServerConfiguration, router: Router) {
        self.init(configuration: configuration, handler: router.handle)
    }

    deinit { shutdown() }

    /// Binds and starts serving; throws ``HTTPServerError`` on bind failure etc.
    public func start() throws {
        try phase.withLock { phase in
            guard case .idle = phase else { throw HTTPServerError.alreadyStarted }
            let daemons = try Daemons.start(core: core)
            phase = .running(daemons, port: daemons.port)
        }
        core.startMemoryTrimmer()
    }

    /// How many requests have begun and not yet completed.
    var inFlightRequests: Int { core.inFlightRequests }

    /// How many deferred replies keep their connection held, not suspended, now.
    var heldReplies: Int {
        phase.withLock { phase in
            guard case .running(let daemons, _) = phase else { return 0 }
            return daemons.loops.reduce(0) { $0 + $1.context.heldReplies.load(ordering: .relaxed) }
        }
    }

    /// The bound port (after start; 0 before).
    public var port: UInt16 {
        phase.withLock { phase in
            if case .running(_, let port) = phase { return port }
            return 0
        }
    }

    /// Graceful: stop accepting, finish in-flight requests, end streams (sources see isShuttingDown), stop daemon.
    ///
    /// Order: ask every loop to stop accepting → mark shutting down and resume every stream →
    /// wait until every loop has stopped accepting and for in-flight requests and streams (at
    /// half of `shutdownTimeout`, the configuration's `beforeRefusingPendingReplies` runs if
    /// replies are pending, those still pending are answered 503 and remaining streams ended) →
    /// stop the loops and their daemons → close the listen socket. A daemon is never stopped while
    /// a connection is suspended. Safe to call more than once.
    public func shutdown() {
        let daemons = phase.withLock { phase -> Daemons? in
            defer { phase = .stopped }
            if case .running(let daemons, _) = phase { return daemons }
            return nil
        }
        guard let daemons else { return }
        daemons.requestQuiesce()
        core.beginShutdown()

        let timeout = core.configuration.shutdownTimeout
        let clock = ContinuousClock()
        let start = clock.now
        var forced = false
        while core.inFlightRequests > 0 || !daemons.isQuiesced, clock.now - start < timeout {
            if !forced, clock.now - start >= timeout / 2 {
                forced = true
                if !core.pendingResponders.isEmpty { core.configuration.beforeRefusingPendingReplies?() }
                for responder in core.pendingResponders {
                    responder.respond(core.configuration.errorResponse(503, "Server shutting down"))
                }
                for stream in core.openStreams { stream.terminate() }
            }
            // Bounded polling: completions arrive on the loops' threads.
            usleep(2_000)
        }
        core.stopTimers()
        daemons.stop()
    }
}

/// The running daemons' loops and the listen socket they share. Each loop holds its daemon's
/// callback context, which libmicrohttpd gets unretained: the loops outlive their daemons.
///
/// `@unchecked Sendable` is safe: the daemon pointers are only passed to libmicrohttpd functions
/// that are thread-safe for a running daemon (`MHD_get_daemon_info`) or reached by the loops'
/// own threads, and `stop()` is reached once, from `HTTPServer.shutdown()`, after the value left
/// the server's lock-protected phase.
private struct Daemons: @unchecked Sendable {
    let loops: [EventLoop]
    let listenSocket: Int32
    let port: UInt16

    static func start(core: ServerCore) throws -> Daemons {
        let configuration = core.configuration
        MHD_set_panic_func(MHDCallbacks.panic, nil)
        raiseOpenFileLimit(toFit: configuration.connectionLimit)
        var address = try SocketAddress(host: configuration.host, port: configuration.port)
        let (listenSocket, port) = try listen(on: &address, configuration: configuration)
        // Each daemon holds its share of the connection limit, as libmicrohttpd's own thread pool
        // did: the shares add up to the limit, and no daemon has less than one connection.
        let limit = max(1, configuration.connectionLimit)
        let count = min(max(1, configuration.threads), limit)
        let timeout =
            configuration.connectionTimeout.map { duration -> UInt32 in
                let (seconds, attoseconds) = duration.components
                return UInt32(clamping: max(0, seconds) + (attoseconds > 0 ? 1 : 0))
            } ?? 0
        var flags = MHD_USE_EPOLL.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
        if address.isIPv6 { flags |= MHD_USE_IPv6.rawValue }

        // Each started daemon with its context, which stays alive here until the daemon stopped.
        var started: [(daemon: OpaquePointer, context: DaemonContext)] = []
        var loops: [EventLoop] = []
        func undo() {
            for loop in loops { loop.stop() }
            for (daemon, _) in started {
                // Quiesced first, so that stopping it leaves the shared socket open.
                _ = MHD_quiesce_daemon(daemon)
                MHD_stop_daemon(daemon)
            }
            close(listenSocket)
        }
        do {
            for index in 0..<count {
                let context = DaemonContext(core: core, waker: try LoopWaker(), hangUps: try HangUpWatch())
                let pointer = Unmanaged.passUnretained(context).toOpaque()
                var options = cmhd_options(
                    connection_limit: UInt32(clamping: limit / count + (index < limit % count ? 1 : 0)),
                    connection_memory_limit: configuration.effectiveMemoryLimit,
                    connection_timeout_seconds: timeout,
                    notify_completed: MHDCallbacks.notifyCompleted,
                    notify_completed_cls: pointer,
                    listen_fd: listenSocket,
                    logger: configuration.libraryMessageHandler == nil ? nil : MHDCallbacks.libraryMessage,
                    logger_cls: pointer)
                guard let daemon = cmhd_start_daemon(UInt32(flags), port, MHDCallbacks.accessHandler, pointer, &options) else {
                    throw HTTPServerError.startFailed(host: configuration.host, port: configuration.port)
                }
                started.append((daemon, context))
                loops.append(try EventLoop(daemon: daemon, context: context))
            }
        } catch {
            undo()
            throw error
        }
        ErrorPages.register(port: port, core: Unmanaged.passUnretained(core))
        return Daemons(loops: loops, listenSocket: listenSocket, port: port)
    }

    /// Asks every loop to stop accepting connections; the listen socket stays open until `stop()`.
    func requestQuiesce() {
        for loop in loops { loop.requestQuiesce() }
    }

    /// Whether every loop has stopped accepting connections.
    var isQuiesced: Bool { loops.allSatisfy(\.isQuiesced) }

    func stop() {
        for loop in loops {
            loop.stop()
            MHD_stop_daemon(loop.raw)
        }
        ErrorPages.unregister(port: port)
        close(listenSocket)
    }

    /// A bound, listening, non-blocking socket for `address`, and its port.
    private static func listen(on address: inout SocketAddress, configuration: HTTPServerConfiguration) throws -> (Int32, UInt16) {
        let failed = HTTPServerError.startFailed(host: configuration.host, port: configuration.port)
        let family = address.isIPv6 ? AF_INET6 : AF_INET
        let socket = Glibc.socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { throw failed }
        var on: Int32 = 1
        // As libmicrohttpd does for the sockets it opens: a restarted server may bind again at
        // once, and an IPv6 address does not also take the IPv4 one.
        _ = setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        if address.isIPv6 {
            _ = setsockopt(socket, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        let length = address.length
        let bound = address.withSockaddr { sockaddr in
            bind(socket, sockaddr, length) == 0 && Glibc.listen(socket, SOMAXCONN) == 0
        }
        var local = sockaddr_storage()
        var localLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &local) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &localLength) == 0 }
        }
        guard bound, named else {
            close(socket)
            throw failed
        }
        let port = withUnsafeBytes(of: &local) { bytes in
            address.isIPv6
                ? UInt16(bigEndian: bytes.load(as: sockaddr_in6.self).sin6_port)
                : UInt16(bigEndian: bytes.load(as: sockaddr_in.self).sin_port)
        }
        return (socket, port)
    }

    /// Raises the soft open-file limit so that `connections` (plus slack) fit, up to the hard limit.
    private static func raiseOpenFileLimit(toFit connections: Int) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        let wanted = rlim_t(max(0, connections) + 64)
        guard limit.rlim_cur < wanted else { return }
        limit.rlim_cur = min(wanted, limit.rlim_max)
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}

/// An IPv4 or IPv6 listen address: an address literal, or a host name resolved once at start.
private struct SocketAddress {
    private var storage = sockaddr_storage()
    let isIPv6: Bool

    init(host: String, port: UInt16) throws {
        var v4 = sockaddr_in()
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = port.bigEndian
            self.init(v4, isIPv6: false)
        } else if inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = port.bigEndian
            self.init(v6, isIPv6: true)
        } else if let resolved = Self.resolve(host) {
            self = resolved
            self.setPort(port)
        } else {
            throw HTTPServerError.invalidHost(host)
        }
    }

    /// The address a host name resolves to (`localhost`, a name from `/etc/hosts` or DNS): its
    /// first IPv4 address, else its first IPv6 one, so that `localhost` listens on 127.0.0.1
    /// where IPv4 clients (and proxies) look for it. Nil when the name does not resolve.
    private static func resolve(_ host: String) -> SocketAddress? {
        guard !host.isEmpty else { return nil }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let list else { return nil }
        defer { freeaddrinfo(list) }
        var v6: SocketAddress?
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let current = entry {
            if let address = current.pointee.ai_addr {
                switch current.pointee.ai_family {
                case AF_INET:
                    let v4 = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in.self)
                    return SocketAddress(v4, isIPv6: false)
                case AF_INET6 where v6 == nil:
                    v6 = SocketAddress(UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in6.self), isIPv6: true)
                default:
                    break
                }
            }
            entry = current.pointee.ai_next
        }
        return v6
    }

    /// Sets the port of a resolved address.
    private mutating func setPort(_ port: UInt16) {
        let isIPv6 = self.isIPv6
        withUnsafeMutableBytes(of: &storage) { bytes in
            if isIPv6 {
                var address = bytes.load(as: sockaddr_in6.self)
                address.sin6_port = port.bigEndian
                bytes.storeBytes(of: address, as: sockaddr_in6.self)
            } else {
                var address = bytes.load(as: sockaddr_in.self)
                address.sin_port = port.bigEndian
                bytes.storeBytes(of: address, as: sockaddr_in.self)
            }
        }
    }

    private init<Address>(_ address: Address, isIPv6: Bool) {
        withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: address, as: Address.self) }
        self.isIPv6 = isIPv6
    }

    /// The size of the address `withSockaddr` passes.
    var length: socklen_t {
        socklen_t(isIPv6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
    }

    mutating func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>) -> R) -> R {
        withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1, body)
        }
    }
}
