import CMicroHTTPD
import Glibc

/// Hands heap memory that closed connections freed back to the system.
///
/// glibc keeps freed small blocks in its arenas; after thousands of connections close (their
/// structures and buffers were allocated on many threads) the process's RSS would otherwise stay
/// at its peak. `malloc_trim` returns whole free pages of every arena; it runs only when the
/// arenas hold at least ``threshold`` bytes free, so a steady server does not pay for it.
///
/// Looking is not free either: `mallinfo2` walks the whole heap, which takes milliseconds once it
/// holds hundreds of megabytes (100,000 instances). So the wait before the next look grows with
/// what the last one took (see ``wait(afterLookTaking:)``), counted in the CPU time of the thread
/// that looked: on a busy machine that preempts the look, its wall-clock time would space the
/// looks out (up to ``longestPeriod``) while they cost no more.
enum MemoryTrim {
    /// Free heap bytes worth trimming.
    static let threshold = 1 << 20
    /// The shortest wait between looks.
    static let period: Duration = .seconds(2)
    /// The longest wait between looks.
    static let longestPeriod: Duration = .seconds(20)
    /// The wait before the next look is at least this many times what the last look took, so
    /// looking costs at most 0.2 % of one core.
    static let costFactor = 500

    /// Looks (and trims if worthwhile); returns how long to wait before the next look.
    static func look() -> Duration {
        let start = threadCPUTime()
        trimIfWorthwhile()
        return wait(afterLookTaking: threadCPUTime() - start)
    }

    /// The CPU time the calling thread has used. `look()` has no suspension point, so it starts
    /// and ends on one thread.
    static func threadCPUTime() -> Duration {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return Duration(now)
    }

    /// The wait after a look that took `spent`: ``period`` for a small heap, ``costFactor`` times
    /// `spent` for a large one, never more than ``longestPeriod``.
    static func wait(afterLookTaking spent: Duration) -> Duration {
        min(max(period, spent * costFactor), longestPeriod)
    }

    /// Trims when enough heap is free; returns whether it did.
    @discardableResult
    static func trimIfWorthwhile() -> Bool {
        _ = heapInitialized
        guard cmhd_heap_free_bytes() >= threshold else { return false }
        return cmhd_heap_trim() == 1
    }

    /// The first call into glibc's allocator initialises it, and that is not thread-safe: two
    /// threads initialising at once both take the main arena while it counts one user, and glibc
    /// aborts when the second of them exits ("a->attached_threads > 0"). Normally the main
    /// thread's first `malloc` initialises it before any server exists; under a sanitizer, whose
    /// allocator replaces `malloc`, the first call is `mallinfo2` here, from the trimmers of
    /// servers started together. A `static let` is initialised exactly once.
    private static let heapInitialized: Void = { _ = cmhd_heap_free_bytes() }()
}
