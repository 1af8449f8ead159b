#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Something that wakes a sleeping thread (an event loop's `eventfd`, say), which a thread
/// running a batch of work may hold back until the batch ends (see ``WakeUpBatch``).
package protocol BatchableWakeUp: AnyObject {
    /// Wakes the thread now.
    func wakeNow()
}

/// Wake-ups a thread holds back while it runs a batch of work, each made once when the batch
/// ends.
///
/// The session store's commit thread answers every request of a batch once it has committed:
/// each answer resumes a connection and wakes its event loop. Woken once per answer, a loop runs
/// once per answer, and on a core shared with the commit thread the kernel switches to the loop
/// and back each time. Inside ``collecting(_:)`` the loop is woken once, after the last answer,
/// and takes them all in one turn. What is held back is only the wake-up: the work it announces
/// (a resumed connection) is already done, so the loop that wakes finds all of it.
package enum WakeUpBatch {
    /// Runs `body` on this thread; the wake-ups ``wake(_:)`` is asked for meanwhile on this thread
    /// are made after it returns, each once. Batches may nest: the outermost one makes them.
    package static func collecting<Result>(_ body: () -> Result) -> Result {
        let batch: Pending
        if let raw = pthread_getspecific(key) {
            batch = Unmanaged<Pending>.fromOpaque(raw).takeUnretainedValue()
        } else {
            batch = Pending()
            // Kept for the thread's life, released by the key's destructor when the thread ends.
            pthread_setspecific(key, Unmanaged.passRetained(batch).toOpaque())
        }
        batch.depth += 1
        let result = body()
        batch.depth -= 1
        if batch.depth == 0 && !batch.held.isEmpty {
            let held = batch.held
            batch.held.removeAll(keepingCapacity: true)
            for wakeUp in held { wakeUp.wakeNow() }
        }
        return result
    }

    /// Wakes `wakeUp`'s thread now, or, inside ``collecting(_:)`` on this thread, once when the
    /// batch ends.
    package static func wake(_ wakeUp: some BatchableWakeUp) {
        if let raw = pthread_getspecific(key) {
            let batch = Unmanaged<Pending>.fromOpaque(raw).takeUnretainedValue()
            if batch.depth > 0 {
                // A batch wakes a few loops at most: a scan costs less than hashing.
                if !batch.held.contains(where: { $0 === wakeUp }) { batch.held.append(wakeUp) }
                return
            }
        }
        wakeUp.wakeNow()
    }

    /// One thread's batch: touched only by that thread.
    private final class Pending {
        var depth = 0
        var held: [any BatchableWakeUp] = []
    }

    /// The key of each thread's ``Pending``, made once.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let result = pthread_key_create(&key) { raw in
            // The thread's retained `Pending`; the destructor runs only for a non-nil value.
            #if canImport(Darwin)
                Unmanaged<Pending>.fromOpaque(raw).release()
            #else
                if let raw { Unmanaged<Pending>.fromOpaque(raw).release() }
            #endif
        }
        precondition(result == 0, "pthread_key_create failed (\(result))")
        return key
    }()
}
