import Synchronization

/// A reference set at most once, read without a lock: the first `storeIfNil` wins and every
/// reader sees that instance.
///
/// The same contract as `Synchronization.AtomicLazyReference`, built from `Atomic` operations
/// that are inlined into the caller. `AtomicLazyReference`'s `load` and `storeIfNil` run inside
/// the toolchain's uninstrumented Synchronization library, so ThreadSanitizer cannot see their
/// acquire and release and reports the published object's fields as racing.
package struct SetOnceReference<Instance: AnyObject & Sendable>: ~Copyable, Sendable {
    /// 0 while unset, else the bit pattern of a retained `Unmanaged<Instance>`.
    private let storage = Atomic<UInt>(0)

    /// An unset reference.
    @inlinable
    package init() {}

    deinit {
        let raw = storage.load(ordering: .acquiring)
        if raw != 0 { Self.unmanaged(raw).release() }
    }

    /// The stored instance, if any.
    @inlinable
    package func load() -> Instance? {
        let raw = storage.load(ordering: .acquiring)
        return raw == 0 ? nil : Self.unmanaged(raw).takeUnretainedValue()
    }

    /// Stores `instance` unless one is stored already; returns the stored one.
    @inlinable
    package func storeIfNil(_ instance: Instance) -> Instance {
        let retained = Unmanaged.passRetained(instance)
        let (stored, current) = storage.compareExchange(
            expected: 0, desired: UInt(bitPattern: retained.toOpaque()), ordering: .acquiringAndReleasing)
        if stored { return instance }
        retained.release()
        return Self.unmanaged(current).takeUnretainedValue()
    }

    @inlinable
    static func unmanaged(_ raw: UInt) -> Unmanaged<Instance> {
        // `raw` is non-zero: the bits of a pointer stored by `storeIfNil`.
        Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: raw)!)
    }
}
