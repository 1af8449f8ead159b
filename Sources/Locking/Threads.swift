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
/// calls and so do not belong on Swift's cooperative pool. `name` (at most 15 bytes are kept) is
/// what `top -H`, `perf` and `/proc/PID/task/*/comm` show for it.
package func startThread(named name: String? = nil, _ body: @escaping () -> Void, error: inout Int32) -> pthread_t? {
    #if canImport(Darwin)
        var thread: pthread_t?
    #else
        var thread = pthread_t()
    #endif
    let context = Unmanaged.passRetained(ThreadBody(body, name: name)).toOpaque()
    let result = pthread_create(
        &thread, nil,
        { raw in
            // `raw` is the retained `ThreadBody` passed below; it is never nil.
            let body = Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue()
            if let name = body.name { nameCurrentThread(name) }
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

/// Starts a detached thread running `body` (nobody joins it); false when the system could not
/// start one (`errno`-style code in `error`). See ``startThread(named:_:error:)``.
package func startDetachedThread(named name: String? = nil, _ body: @escaping () -> Void, error: inout Int32) -> Bool {
    guard let thread = startThread(named: name, body, error: &error) else { return false }
    pthread_detach(thread)
    return true
}

/// What a new thread runs.
private final class ThreadBody {
    let body: () -> Void
    let name: String?
    init(_ body: @escaping () -> Void, name: String?) {
        self.body = body
        self.name = name
    }
}

/// Names the calling thread (Linux keeps 15 bytes of it). Through `/proc/thread-self/comm`, as
/// `pthread_setname_np` is not in Swift's Glibc module; where that file is missing the thread
/// keeps its name.
private func nameCurrentThread(_ name: String) {
    let kept = Array(name.utf8.prefix(15))
    #if canImport(Darwin)
        _ = String(decoding: kept, as: UTF8.self).withCString { pthread_setname_np($0) }
    #else
        let file = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard file >= 0 else { return }
        _ = kept.withUnsafeBytes { write(file, $0.baseAddress, $0.count) }
        close(file)
    #endif
}
