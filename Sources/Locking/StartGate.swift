import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where threads that find a runtime starting on another thread wait for it to finish: one
/// mutex and condition variable for every runtime in the process, so that a runtime holds no
/// lock of its own for the one time it starts (about 80 bytes of memory per reactor; with
/// 100,000 instances, 8 MB).
///
/// A wait happens only when two threads use a new reactor for the first time at once, and a
/// start is short (the initial state and the `transform` builders), so one gate for all is
/// enough: a waiter woken by another runtime's start checks its own and waits again.
@usableFromInline package final class StartGate: @unchecked Sendable {
    // `@unchecked Sendable`: the mutex and condition variable are only used through the
    // pthread calls below, which synchronise by themselves; both are allocated once, never
    // moved, and live as long as the process (the gate is a global).
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let opened = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    /// The gate every runtime uses.
    @usableFromInline package static let shared = StartGate()

    private init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(opened, nil)
    }

    /// Blocks until `isOpen` returns true. `isOpen` is checked under the gate's mutex, so a
    /// `broadcast` after it turned true is never missed.
    @usableFromInline package func wait(until isOpen: () -> Bool) {
        pthread_mutex_lock(mutex)
        while !isOpen() { pthread_cond_wait(opened, mutex) }
        pthread_mutex_unlock(mutex)
    }

    /// Wakes every waiter to check again. Call after making a waiter's condition true.
    @usableFromInline package func broadcast() {
        pthread_mutex_lock(mutex)
        pthread_cond_broadcast(opened)
        pthread_mutex_unlock(mutex)
    }
}
