#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a `pthread_mutex_t`.
///
/// Used instead of `Synchronization.Mutex` because ThreadSanitizer understands pthread mutexes
/// (it intercepts them) but not `Mutex`'s futex on Linux, so every module can be checked with
/// `swift test --sanitize=thread`. Uncontended, it costs about the same.
@usableFromInline
package final class Locked<Value>: @unchecked Sendable {
    // `@unchecked Sendable` is safe: `value` is read and written only inside `withLock`,
    // between `pthread_mutex_lock` and `pthread_mutex_unlock` on `mutex`, so accesses from
    // different threads never overlap and each sees the previous one's writes. `mutex` itself
    // is allocated once and never moved.

    /// `@exclusivity(unchecked)`: the mutex already guarantees exclusive access.
    @usableFromInline @exclusivity(unchecked) var value: Value
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    /// Guards `value`.
    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value. Do not call back into the same lock
    /// from `body`: it is not recursive.
    @inlinable
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
