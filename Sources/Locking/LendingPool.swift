import Dispatch

/// A fixed number of resources (database connections), each lent to one caller at a time:
/// callers on different threads each get a free one, and wait while all are lent. A resource is
/// made on its first loan, so those never needed are never made.
package final class LendingPool<Resource>: Sendable {
    /// One resource each, made on first use. Only the caller holding a slot's index (taken
    /// from `free`) uses the slot, so its lock is never contended; it is there to hand the
    /// resource from one borrowing thread to the next.
    private let slots: [Locked<Resource?>]
    /// Indices of the slots not lent.
    private let free: Locked<[Int]>
    /// Counts the free slots.
    private let available: DispatchSemaphore

    /// A pool of `size` resources (at least one).
    package init(size: Int) {
        let size = max(1, size)
        slots = (0..<size).map { _ in Locked(nil) }
        free = Locked(Array((0..<size).reversed()))
        available = DispatchSemaphore(value: size)
    }

    /// Runs `body` with a free resource, made by `make` if its slot has none yet; waits while
    /// every resource is lent. A resource whose `make` failed is tried again on a later loan.
    package func borrow<Result, Failure: Error>(
        make: () throws(Failure) -> Resource, _ body: (Resource) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        available.wait()
        let index = free.withLock { $0.removeLast() }
        defer {
            free.withLock { $0.append(index) }
            available.signal()
        }
        return try slots[index].withLock { slot throws(Failure) -> Result in
            let resource: Resource
            if let existing = slot {
                resource = existing
            } else {
                resource = try make()
                slot = resource
            }
            return try body(resource)
        }
    }

    /// Runs `body` on each resource made so far, waiting for any that is lent.
    package func forEachMade(_ body: (Resource) -> Void) {
        for slot in slots {
            slot.withLock { resource in resource.map(body) }
        }
    }
}
