import CMicroHTTPD
import Glibc
import Locking
import Synchronization

/// Wakes one ``EventLoop`` from any thread: an `eventfd` the loop polls beside its daemon.
///
/// libmicrohttpd drops its own wake-up channel when it runs without an internal thread, so a
/// connection resumed from another thread is noticed only when the loop runs again; ``wake()``
/// makes it run. Wake-ups that arrive while one is already pending are folded into it, and those
/// asked for inside a ``WakeUpBatch`` are made once, when the batch ends.
final class LoopWaker: Sendable, BatchableWakeUp {
    /// The `eventfd`; closed when the last holder lets go.
    let descriptor: Int32
    /// Whether a wake-up has been signalled that the loop has not yet taken.
    private let pending = Atomic<Bool>(false)

    init() throws(HTTPServerError) {
        descriptor = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard descriptor >= 0 else { throw .eventLoopFailed(errno) }
    }

    deinit { close(descriptor) }

    /// Makes the loop run soon; cheap when a wake-up is already pending. Inside a
    /// ``WakeUpBatch`` on this thread, once the batch ends.
    func wake() { WakeUpBatch.wake(self) }

    /// Makes the loop run soon, whatever batch this thread is in.
    func wakeNow() {
        // Sequentially consistent with `beginTurn`: a waker that finds a wake-up pending knows
        // the loop has not yet begun its next turn, so that turn's run sees what this waker changed.
        guard !pending.exchange(true, ordering: .sequentiallyConsistent) else { return }
        var one: UInt64 = 1
        _ = write(descriptor, &one, MemoryLayout<UInt64>.size)
    }

    /// Called by the loop after `poll` and before it runs the daemon: empties the `eventfd`
    /// when `poll` reported it readable, then lets later wake-ups signal again.
    ///
    /// In this order because the read takes every write made so far, and each of those wakers
    /// had set the flag before writing: clearing the flag after the read leaves no flag set
    /// without a signal. Cleared first, a waker could set it again and write, the read would take
    /// that write too, and every later wake-up would be folded into one that never comes.
    func beginTurn(signalled: Bool) {
        if signalled {
            var count: UInt64 = 0
            _ = read(descriptor, &count, MemoryLayout<UInt64>.size)
        }
        pending.store(false, ordering: .sequentiallyConsistent)
    }
}

/// What libmicrohttpd's callbacks get as their context: the server, the waker of the loop
/// running the daemon that called them (a connection resumed later must wake that loop), and the
/// loop's watch for streams whose clients hang up.
final class DaemonContext: Sendable {
    let core: ServerCore
    let waker: LoopWaker
    let hangUps: HangUpWatch
    /// How many of the daemon's connections hold a deferred reply without being suspended. Only
    /// the loop thread reads and changes it (the access handler and the completion callback run
    /// there); an atomic because the context is shared with other threads for its other fields.
    let heldReplies = Atomic<Int>(0)

    init(core: ServerCore, waker: LoopWaker, hangUps: HangUpWatch) {
        self.core = core
        self.waker = waker
        self.hangUps = hangUps
    }
}

/// One libmicrohttpd daemon in external epoll mode, run by a thread of its own:
/// `poll` on the daemon's epoll descriptor, the waker and the ``HangUpWatch``, then `MHD_run`,
/// until stopped.
///
/// `poll`, not an epoll set of our own holding the daemon's: the kernel treats an epoll set that
/// is itself watched by another as nested, and then every `EPOLL_CTL_ADD` to it takes a global
/// lock and checks the wake-up paths. libmicrohttpd adds a connection back to its set each time
/// one is resumed: once per request for a handler that suspends its reply until work elsewhere
/// is done. Each event on a connection would also be passed on to the outer set.
///
/// Every daemon callback runs on that thread. Other threads reach the daemon only through
/// ``requestQuiesce()``, which asks the loop thread to act, through ``stop()``, which acts once
/// the thread has ended, and through `MHD_resume_connection`, which libmicrohttpd allows from any
/// thread (followed by a wake-up).
final class EventLoop: Sendable {
    /// Requests to the loop thread, as bits.
    private enum Request {
        static let quiesce: UInt8 = 1
        static let stop: UInt8 = 2
    }

    let context: DaemonContext
    private let daemon: DaemonPointer
    private let requests = Atomic<UInt8>(0)
    /// Set by the loop thread once it has quiesced the daemon.
    private let quiesced = Atomic<Bool>(false)
    private let thread = Locked<pthread_t?>(nil)

    /// Starts `daemon` (already created, in external epoll mode) on a new thread.
    init(daemon: OpaquePointer, context: DaemonContext) throws(HTTPServerError) {
        self.daemon = DaemonPointer(raw: daemon)
        self.context = context
        guard cmhd_epoll_fd(daemon) >= 0 else { throw .eventLoopFailed(EBADF) }
        let started = try startJoinableThread(named: "rs-http") { [self] in run() }
        thread.withLock { $0 = started }
    }

    /// The daemon, for `MHD_stop_daemon` once ``stop()`` has returned.
    var raw: OpaquePointer { daemon.raw }

    private func run() {
        let waker = context.waker
        let hangUps = context.hangUps
        let readable = Int16(POLLIN)
        var descriptors = (
            pollfd(fd: cmhd_epoll_fd(daemon.raw), events: readable, revents: 0),
            pollfd(fd: waker.descriptor, events: readable, revents: 0),
            pollfd(fd: hangUps.descriptor, events: readable, revents: 0)
        )
        var connections = cmhd_current_connections(daemon.raw)
        var runAgain = false
        while true {
            let requested = requests.load(ordering: .acquiring)
            if requested & Request.stop != 0 { return }
            if requested & Request.quiesce != 0 { quiesceDaemon() }
            var wait: Int32 = -1
            var timeout: CUnsignedLongLong = 0
            if runAgain {
                wait = 0
            } else if MHD_get_timeout(daemon.raw, &timeout) == MHD_Result.YES {
                wait = Int32(clamping: timeout)
                // A connection holding a deferred reply stays among the daemon's ready ones, so the
                // daemon asks for no wait at all. Its reply wakes the loop; until then, look again
                // each millisecond, so a reply held too long gets its connection suspended.
                if wait == 0, context.heldReplies.load(ordering: .relaxed) > 0 { wait = 1 }
            }
            let ready = withUnsafeMutableBytes(of: &descriptors) { buffer in
                poll(buffer.baseAddress!.assumingMemoryBound(to: pollfd.self), 3, wait)
            }
            waker.beginTurn(signalled: ready > 0 && descriptors.1.revents & readable != 0)
            if ready > 0, descriptors.2.revents & readable != 0 {
                // Before the run: no stream named here has completed since the watch saw it.
                for id in hangUps.takeHungUp() { context.core.stream(id)?.clientHungUp() }
            }
            _ = MHD_run(daemon.raw)
            // At its connection limit (or out of descriptors) the daemon takes the listen socket
            // out of its epoll set, and puts it back only at the start of a run after a connection
            // has closed: so after a run that closed any, run once more without waiting.
            let open = cmhd_current_connections(daemon.raw)
            runAgain = open < connections
            connections = open
        }
    }

    /// Asks the loop thread to stop the daemon accepting connections, at its next turn (which
    /// this starts). Does not wait: the thread may be busy in a handler that waits for shutdown.
    func requestQuiesce() {
        requests.bitwiseOr(Request.quiesce, ordering: .releasing)
        context.waker.wakeNow()
    }

    /// Whether the daemon no longer accepts connections.
    var isQuiesced: Bool { quiesced.load(ordering: .acquiring) }

    /// Ends the loop thread and waits for it, and quiesces the daemon if the thread had not, so
    /// that the caller's `MHD_stop_daemon` leaves the shared listen socket open.
    func stop() {
        requests.bitwiseOr(Request.stop, ordering: .releasing)
        // Now, not at the end of a batch this thread may be in: it waits for the loop next.
        context.waker.wakeNow()
        if let running = thread.withLock({ thread in
            defer { thread = nil }
            return thread
        }) {
            pthread_join(running, nil)
        }
        quiesceDaemon()
    }

    /// Stops the daemon accepting, once; only from the loop thread, or after it has ended. The
    /// listen socket, shared by every loop, stays open: the server closes it once all let go.
    private func quiesceDaemon() {
        guard !quiesced.load(ordering: .acquiring) else { return }
        _ = MHD_quiesce_daemon(daemon.raw)
        quiesced.store(true, ordering: .releasing)
    }
}

/// A daemon pointer that may cross threads.
///
/// `@unchecked Sendable` is safe: the pointer is dereferenced only by libmicrohttpd, on the loop
/// thread (`MHD_run`, `MHD_get_timeout`, `MHD_quiesce_daemon`), or by functions it documents as
/// callable from any thread (`MHD_get_daemon_info`), or by `MHD_stop_daemon` after the loop
/// thread has been joined.
struct DaemonPointer: @unchecked Sendable {
    let raw: OpaquePointer
}

/// Starts a joinable thread running `body`.
private func startJoinableThread(named name: String, _ body: @escaping @Sendable () -> Void) throws(HTTPServerError) -> pthread_t {
    var error: Int32 = 0
    guard let thread = startThread(named: name, body, error: &error) else { throw .eventLoopFailed(error) }
    return thread
}
