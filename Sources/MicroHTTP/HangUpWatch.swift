import CMicroHTTPD
import Glibc

/// Notices at once when the client of a stream hangs up, while its connection is suspended.
///
/// libmicrohttpd takes a suspended connection out of its own epoll set, so a client that closes an
/// idle stream would otherwise be noticed only at the stream's next write (its heartbeat, by
/// default every 15 s), and its connection and memory held until then. Each ``EventLoop`` polls
/// one watch beside its daemon; a stream's socket is in it from the response's start until the
/// completion callback, which runs before libmicrohttpd closes the socket, so the watch never holds
/// a number the kernel may have handed to another connection.
///
/// Edge-triggered, for the hang-up only (`EPOLLRDHUP`, with `EPOLLHUP` and `EPOLLERR`, which epoll
/// always reports): each stream's hang-up is reported once, and bytes a client sends are not
/// reported at all. libmicrohttpd closes a connection whose client has shut down its side too.
final class HangUpWatch: Sendable {
    /// The epoll descriptor the loop polls; closed with the watch.
    let descriptor: Int32

    init() throws(HTTPServerError) {
        descriptor = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard descriptor >= 0 else { throw .eventLoopFailed(errno) }
    }

    deinit { close(descriptor) }

    /// Watches `socket`, which belongs to the stream numbered `streamID`; false when the kernel
    /// refused (the stream then learns of a hang-up at its next write, as without the watch).
    func watch(socket: Int32, streamID: UInt64) -> Bool {
        var event = epoll_event()
        event.events = EPOLLRDHUP.rawValue | EPOLLET.rawValue
        event.data.u64 = streamID
        return epoll_ctl(descriptor, EPOLL_CTL_ADD, socket, &event) == 0
    }

    /// Stops watching `socket`; only while it is still open (from the completion callback).
    func unwatch(socket: Int32) {
        _ = epoll_ctl(descriptor, EPOLL_CTL_DEL, socket, nil)
    }

    /// The streams whose clients hung up since the last call, without waiting. Only from the loop
    /// thread, between its runs of the daemon: no stream it names has completed in between.
    func takeHungUp() -> [UInt64] {
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        var streams: [UInt64] = []
        while true {
            let count = events.withUnsafeMutableBufferPointer { buffer in
                epoll_wait(descriptor, buffer.baseAddress, Int32(buffer.count), 0)
            }
            guard count > 0 else { return streams }
            streams.append(contentsOf: events[0..<Int(count)].map(\.data.u64))
            if count < events.count { return streams }
        }
    }
}

/// A stream's socket in a loop's ``HangUpWatch``.
struct WatchedSocket: Sendable {
    let watch: HangUpWatch
    let socket: Int32
}
