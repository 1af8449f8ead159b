import CMicroHTTPD
import Glibc

/// A libmicrohttpd connection pointer that may cross threads, with the waker of the loop that
/// runs its daemon.
///
/// `@unchecked Sendable` is safe because Swift never dereferences the pointer: it is only passed to
/// `MHD_suspend_connection` / `MHD_resume_connection`, which libmicrohttpd documents as callable from
/// any thread, and every owner (``HTTPStream``, ``HTTPResponder``) calls them under its own lock and
/// only while the connection is alive (a suspended connection cannot complete, and owners stop using
/// the handle once the completion callback has run).
struct ConnectionHandle: @unchecked Sendable {
    let raw: OpaquePointer
    let waker: LoopWaker

    func suspend() { MHD_suspend_connection(raw) }

    /// Resumes the connection and wakes its loop, which libmicrohttpd does not do by itself when
    /// it runs without an internal thread.
    func resume() {
        MHD_resume_connection(raw)
        waker.wake()
    }
}

/// Monotonic time in nanoseconds.
enum MonotonicClock {
    /// The coarse clock (a tick of a few milliseconds): cheap enough for every write.
    static func nanoseconds() -> UInt64 { read(CLOCK_MONOTONIC_COARSE) }

    /// The precise clock, for spans shorter than the coarse clock's tick.
    static func preciseNanoseconds() -> UInt64 { read(CLOCK_MONOTONIC) }

    private static func read(_ clock: clockid_t) -> UInt64 {
        var now = timespec()
        clock_gettime(clock, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}
