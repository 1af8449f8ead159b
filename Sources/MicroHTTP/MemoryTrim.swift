import CMicroHTTPD

/// Hands heap memory that closed connections freed back to the system.
///
/// glibc keeps freed small blocks in its arenas; after thousands of connections close (their
/// structures and buffers were allocated on many threads) the process's RSS would otherwise stay
/// at its peak. `malloc_trim` returns whole free pages of every arena; it runs only when the
/// arenas hold at least ``threshold`` bytes free, so a steady server does not pay for it.
enum MemoryTrim {
    /// Free heap bytes worth trimming.
    static let threshold = 1 << 20
    /// How often the server looks.
    static let period: Duration = .seconds(2)

    /// Trims when enough heap is free; returns whether it did.
    @discardableResult
    static func trimIfWorthwhile() -> Bool {
        guard cmhd_heap_free_bytes() >= threshold else { return false }
        return cmhd_heap_trim() == 1
    }
}
