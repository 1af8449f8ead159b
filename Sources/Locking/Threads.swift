#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Starts a thread running `body` and returns it, joinable (detach it if nobody will join it);
/// nil when the system could not start one (`errno`-style code in `error`).
///
/// For the package's own long-lived threads (reactor threads, event loops), which block in system
/// calls and so do not belong on Swift's cooperative pool.
package func startThread(_ body: @escaping () -> Void, error: inout Int32) -> pthread_t? {
    #if canImport(Darwin)
        var thread: pthread_t?
    #else
        var thread = pthread_t()
    #endif
    let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    let result = pthread_create(
        &thread, nil,
        { raw in
            // `raw` is the retained `ThreadBody` passed below; it is never nil.
            let body = Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue()
            body.body()
            return nil
        }, context)
    guard result == 0 else {
        Unmanaged<ThreadBody>.fromOpaque(context).release()
        error = result
        return nil
    }
    return thread
}

/// What a new thread runs.
private final class ThreadBody {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}
