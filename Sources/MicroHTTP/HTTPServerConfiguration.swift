import Glibc

/// Settings of an ``HTTPServer``.
///
/// Header size and memory: libmicrohttpd keeps the request line and header fields in each
/// connection's memory pool. The server sizes that pool to at least `maxHeaderSize` plus
/// ``headerPoolMargin`` so that any header section up to `maxHeaderSize` reaches the server, which
/// answers 431 through `errorResponse` when a header section is larger than `maxHeaderSize`.
/// A header section too large even for the pool (libmicrohttpd also spends about 64 bytes of it
/// per field) is refused by libmicrohttpd itself (431, or 414 for a request line) with its own
/// short HTML body; libmicrohttpd 0.9.75 has no way to replace that body.
public struct HTTPServerConfiguration: Sendable {
    /// Address to listen on: an IPv4 or IPv6 literal, or a host name (`localhost`), resolved at
    /// start to its first IPv4 address, else its first IPv6 one.
    public var host = "127.0.0.1"
    /// Port to listen on; 0 picks a free port (read ``HTTPServer/port`` after start).
    public var port: UInt16 = 0
    /// Event loops, each a thread running its own libmicrohttpd daemon; defaults to
    /// ``activeProcessorCount`` (the cgroup CPU quota counts).
    public var threads = HTTPServerConfiguration.activeProcessorCount
    /// Maximum simultaneous connections; the open-file soft limit is raised to fit when possible.
    public var connectionLimit = 16_384
    /// Memory pool per connection in bytes (holds the request headers and I/O buffers); the pool
    /// is at least `maxHeaderSize` + ``headerPoolMargin``.
    ///
    /// libmicrohttpd clears about 1.5 pools per request on a keep-alive connection and keeps about
    /// half a pool (plus a page) of every open stream in memory, so a small pool makes requests
    /// cheaper and streams smaller. Pools of 32 KiB or less come from `malloc`; the server returns
    /// freed heap to the system (`malloc_trim`) once enough of it is free.
    public var connectionMemoryLimit = 10 * 1024
    /// How long a deferred reply (``HTTPResponse/deferred(_:)``) may keep its connection among
    /// the ready ones before it is suspended. Held, the connection costs the event loop a look
    /// each time it runs (and a run at least each millisecond); suspended, it leaves the
    /// daemon's epoll set and comes back when answered: two `epoll_ctl` calls and a `recv` per
    /// reply. So replies that come within about this long (a durable store's commit) are cheaper
    /// held, and those that wait for slow work are suspended. Zero suspends at once.
    public var deferredReplyHold: Duration = .milliseconds(10)
    /// Closes connections idle for this long (rounded up to whole seconds); nil never does.
    /// Suspended connections (idle streams, deferred replies) never time out.
    public var connectionTimeout: Duration? = nil
    /// Largest accepted request body; larger ones are answered 413.
    public var maxBodySize = 1 << 20
    /// Largest accepted header section (request line and fields); larger ones are answered 431.
    public var maxHeaderSize = 8 * 1024
    /// Upper bound on the wait for in-flight requests and streams during ``HTTPServer/shutdown()``.
    /// Deferred replies still pending at half of it are answered 503; streams still open then are ended.
    public var shutdownTimeout: Duration = .seconds(10)
    /// Called once during ``HTTPServer/shutdown()``, on the thread shutting down, when half of
    /// ``shutdownTimeout`` has passed with deferred replies still pending, just before those still
    /// pending are answered 503: a handler whose deferred replies have a better answer by then
    /// (`202 Accepted` for work taken on and not finished) gives it here. Nil, the default:
    /// every pending reply is answered 503.
    public var beforeRefusingPendingReplies: (@Sendable () -> Void)? = nil
    /// Builds replies to errors found by the server itself (413, 431, 400 …): status, short detail.
    public var errorResponse: @Sendable (_ status: Int, _ detail: String) -> HTTPResponse = { status, detail in
        HTTPResponse.text(detail + "\n", status: status)
    }

    /// Receives each message libmicrohttpd logs itself, one line without its newline: a request
    /// it could not parse and answered itself (400), a client that left while being answered, a
    /// failed `accept` (too many open files), memory or a system call failing. Called on the
    /// event loops' threads, so it must not block. A message may name the request's path. Nil,
    /// the default: libmicrohttpd logs nothing.
    public var libraryMessageHandler: (@Sendable (_ message: String) -> Void)? = nil

    /// Defaults as documented on each property.
    public init() {}

    /// Working room added to `maxHeaderSize` when sizing the connection pool: the reply's header
    /// and libmicrohttpd's bookkeeping need a few hundred bytes of it.
    public static let headerPoolMargin = 2 * 1024

    /// The memory pool size handed to libmicrohttpd.
    var effectiveMemoryLimit: Int {
        max(connectionMemoryLimit, maxHeaderSize + Self.headerPoolMargin)
    }

    /// Processors this process may keep busy (at least 1): those online and in its CPU
    /// affinity, capped by its cgroup's CPU quota rounded up, so that a container limited to
    /// 2 CPUs on a 64-core host counts 2 (as SwiftNIO's `System.coreCount`).
    public static var activeProcessorCount: Int {
        ProcessorCount.current
    }
}

/// Why an ``HTTPServer`` could not start.
public enum HTTPServerError: Error, Sendable, Equatable {
    /// `host` is neither an IPv4 or IPv6 address literal nor a name that resolves.
    case invalidHost(String)
    /// libmicrohttpd could not start (port in use, no permission, limits …).
    case startFailed(host: String, port: UInt16)
    /// `start()` was called twice, or after `shutdown()`.
    case alreadyStarted
    /// An event loop's thread or `eventfd` could not be created, or its daemon had no epoll
    /// descriptor (the `errno` value).
    case eventLoopFailed(Int32)
}
