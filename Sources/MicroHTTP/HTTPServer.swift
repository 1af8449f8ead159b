import Locking
import CMicroHTTPD
import Glibc

/// Handles one request; runs synchronously on a server thread (return `.deferred`/`.async` to wait).
public typealias HTTPHandler = @Sendable (HTTPRequest) -> HTTPResponse

/// An HTTP/1.1 server over libmicrohttpd.
///
/// Threading: libmicrohttpd's internal poll loop with a pool of `threads` workers
/// (`MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME`). Handlers run on
/// those workers; streams and deferred replies suspend their connection, which then leaves the
/// poll set.
public final class HTTPServer: Sendable {
    private enum Phase {
        case idle
        case running(DaemonHandle, port: UInt16)
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
            let daemon = try DaemonHandle.start(core: core)
            phase = .running(daemon, port: cmhd_bind_port(daemon.raw))
        }
        core.startMemoryTrimmer()
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
    /// Order: quiesce (stop accepting) → mark shutting down and resume every stream → wait for
    /// in-flight requests and streams (at half of `shutdownTimeout`, pending deferred replies are
    /// answered 503 and remaining streams ended) → stop the daemon → close the listen socket.
    /// The daemon is never stopped while a connection is suspended. Safe to call more than once.
    public func shutdown() {
        let daemon = phase.withLock { phase -> DaemonHandle? in
            defer { phase = .stopped }
            if case .running(let daemon, _) = phase { return daemon }
            return nil
        }
        guard let daemon else { return }
        let listenSocket = MHD_quiesce_daemon(daemon.raw)
        core.beginShutdown()

        let timeout = core.configuration.shutdownTimeout
        let clock = ContinuousClock()
        let start = clock.now
        var forced = false
        while core.inFlightRequests > 0, clock.now - start < timeout {
            if !forced, clock.now - start >= timeout / 2 {
                forced = true
                for responder in core.pendingResponders {
                    responder.respond(core.configuration.errorResponse(503, "Server shutting down"))
                }
                for stream in core.openStreams { stream.terminate() }
            }
            // Bounded polling: completions arrive on libmicrohttpd's threads.
            usleep(2_000)
        }
        core.stopHeartbeatTimer()
        daemon.stop()
        if listenSocket >= 0 { close(listenSocket) }
    }
}

/// The running daemon and the retained context its callbacks use.
///
/// `@unchecked Sendable` is safe: the pointer is only passed to libmicrohttpd functions that are
/// thread-safe for a running daemon (`MHD_get_daemon_info`, `MHD_quiesce_daemon`), and `stop()` is
/// reached once, from `HTTPServer.shutdown()`, after the handle left the server's lock-protected phase.
private struct DaemonHandle: @unchecked Sendable {
    let raw: OpaquePointer
    let context: Unmanaged<ServerCore>

    static func start(core: ServerCore) throws -> DaemonHandle {
        let configuration = core.configuration
        MHD_set_panic_func(MHDCallbacks.panic, nil)
        raiseOpenFileLimit(toFit: configuration.connectionLimit)
        var address = try SocketAddress(host: configuration.host, port: configuration.port)
        let context = Unmanaged.passRetained(core)
        let timeout = configuration.connectionTimeout.map { duration -> UInt32 in
            let (seconds, attoseconds) = duration.components
            return UInt32(clamping: max(0, seconds) + (attoseconds > 0 ? 1 : 0))
        } ?? 0
        var flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_POLL.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
        if address.isIPv6 { flags |= MHD_USE_IPv6.rawValue }
        let daemon = address.withSockaddr { sockaddr in
            var options = cmhd_options(
                thread_pool_size: UInt32(clamping: max(1, configuration.threads)),
                connection_limit: UInt32(clamping: max(1, configuration.connectionLimit)),
                connection_memory_limit: configuration.effectiveMemoryLimit,
                connection_timeout_seconds: timeout,
                notify_completed: MHDCallbacks.notifyCompleted,
                notify_completed_cls: context.toOpaque(),
                sock_addr: sockaddr)
            return cmhd_start_daemon(UInt32(flags), configuration.port, MHDCallbacks.accessHandler, context.toOpaque(), &options)
        }
        guard let daemon else {
            context.release()
            throw HTTPServerError.startFailed(host: configuration.host, port: configuration.port)
        }
        ErrorPages.register(port: cmhd_bind_port(daemon), core: context)
        return DaemonHandle(raw: daemon, context: context)
    }

    func stop() {
        let port = cmhd_bind_port(raw)
        MHD_stop_daemon(raw)
        ErrorPages.unregister(port: port)
        context.release()
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

/// An IPv4 or IPv6 listen address.
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
        } else {
            throw HTTPServerError.invalidHost(host)
        }
    }

    private init<Address>(_ address: Address, isIPv6: Bool) {
        withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: address, as: Address.self) }
        self.isIPv6 = isIPv6
    }

    mutating func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>) -> R) -> R {
        withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1, body)
        }
    }
}
