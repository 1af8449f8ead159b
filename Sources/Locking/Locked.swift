#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value guarded by a `pthread_mutex_t`, in one heap allocation.
///
/// Used instead of `Synchronization.Mutex` because ThreadSanitizer understands pthread mutexes
/// (it intercepts them) but not `Mutex`'s futex on Linux, so every module can be checked with
/// `swift test --sanitize=thread`. Uncontended, it costs about the same.
///
/// `Locked` is a reference: copies share the same value and mutex.
@usableFromInline
package struct Locked<Value>: @unchecked Sendable {
    // `@unchecked Sendable` is safe: the value is read and written only inside `withLock`,
    // between `pthread_mutex_lock` and `pthread_mutex_unlock` on the mutex stored next to it,
    // so accesses from different threads never overlap and each sees the previous one's
    // writes. Both live in one `ManagedBuffer`, which never moves, so the mutex's address is
    // stable for its whole life.
    @usableFromInline let storage: LockedStorage<Value>

    /// Guards `value`.
    @inlinable
    package init(_ value: Value) {
        storage = LockedStorage.make(value)
    }

    /// Runs `body` with exclusive access to the value, throwing what `body` throws (its own
    /// error type). Do not call back into the same lock from `body`: it is not recursive.
    @inlinable
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        try storage.withUnsafeMutablePointers { (mutex, value) throws(Failure) -> Result in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }
    }
}

/// The mutex (as the header) and its value (as the single element) of a ``Locked``.
///
/// The mutex comes first so that it shares a cache line with the start of the value, where
/// types guarded by a lock keep the fields their hot paths use: when many locked values are
/// cold (one per instance, with thousands of instances), taking the lock and reading those
/// fields then misses the cache once rather than twice.
@usableFromInline
package final class LockedStorage<Value>: ManagedBuffer<pthread_mutex_t, Value> {
    @inlinable
    static func make(_ value: Value) -> LockedStorage<Value> {
        let buffer = create(minimumCapacity: 1) { _ in pthread_mutex_t() }
        buffer.withUnsafeMutablePointers { mutex, element in
            element.initialize(to: value)
            pthread_mutex_init(mutex, nil)
        }
        // `create` returns the dynamic type it was called on.
        return unsafeDowncast(buffer, to: LockedStorage<Value>.self)
    }

    deinit {
        withUnsafeMutablePointers { mutex, element in
            element.deinitialize(count: 1)
            pthread_mutex_destroy(mutex)
        }
    }
}
