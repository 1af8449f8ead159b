#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// How many processors this process may keep busy: the processors online, less those its CPU
/// affinity leaves out, capped by its cgroup's CPU quota rounded up (as SwiftNIO's
/// `System.coreCount` does), so that a container limited to 2 CPUs on a 64-core host counts 2.
///
/// The quota is cgroup v2's `cpu.max` (`max 100000` is none, `200000 100000` two CPUs) or
/// cgroup v1's `cpu.cfs_quota_us` over `cpu.cfs_period_us` (a quota of `-1` is none), read for
/// the process's own cgroup (from `/proc/self/cgroup`) and every cgroup above it up to the
/// mount's root, the smallest winning. In a container the root is the container's own cgroup.
enum ProcessorCount {
    /// The count for this process (at least 1).
    static var current: Int {
        let online = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        var count = min(online, affinityCount() ?? online)
        if let quota = cgroupQuota() { count = min(count, quota) }
        return max(1, count)
    }

    /// The CPU quota in whole processors (rounded up, at least 1), nil when there is none.
    /// - Parameter root: where the file system is (a test's directory in tests).
    static func cgroupQuota(root: String = "") -> Int? {
        let memberships = readFile(root + "/proc/self/cgroup") ?? ""
        var v2Path = "/"
        var v1Path = "/"
        for line in memberships.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else { continue }
            if parts[0] == "0" && parts[1].isEmpty { v2Path = String(parts[2]) }
            if parts[1].split(separator: ",").contains("cpu") { v1Path = String(parts[2]) }
        }
        var smallest: Double?
        func consider(_ cpus: Double?) {
            guard let cpus, cpus > 0 else { return }
            smallest = min(smallest ?? cpus, cpus)
        }
        for directory in ancestors(of: v2Path, under: root + "/sys/fs/cgroup") {
            consider(readFile(directory + "/cpu.max").flatMap(v2CPUs))
        }
        for directory in ancestors(of: v1Path, under: root + "/sys/fs/cgroup/cpu") {
            guard let quota = readFile(directory + "/cpu.cfs_quota_us"),
                let period = readFile(directory + "/cpu.cfs_period_us")
            else { continue }
            consider(v1CPUs(quota: quota, period: period))
        }
        return smallest.map { max(1, Int(($0 - 1e-9).rounded(.up))) }
    }

    /// CPUs in a cgroup v2 `cpu.max` (`QUOTA PERIOD`, or `max PERIOD` for none).
    static func v2CPUs(_ text: String) -> Double? {
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count >= 1, let quota = Double(fields[0]) else { return nil }
        let period = fields.count >= 2 ? Double(fields[1]) ?? 100_000 : 100_000
        return period > 0 ? quota / period : nil
    }

    /// CPUs in cgroup v1's `cpu.cfs_quota_us` and `cpu.cfs_period_us` (a quota of -1 is none).
    static func v1CPUs(quota: String, period: String) -> Double? {
        guard let quota = Double(quota.trimmingNewlines), quota > 0,
            let period = Double(period.trimmingNewlines), period > 0
        else { return nil }
        return quota / period
    }

    /// `mount + path` and each directory above it, up to `mount`.
    private static func ancestors(of path: String, under mount: String) -> [String] {
        var segments = path.split(separator: "/").map(String.init)
        var directories: [String] = []
        while true {
            directories.append(mount + (segments.isEmpty ? "" : "/" + segments.joined(separator: "/")))
            if segments.isEmpty { return directories }
            segments.removeLast()
        }
    }

    /// Processors in this process's CPU affinity mask, from `Cpus_allowed_list` in
    /// `/proc/self/status` (`0-3,8`); Glibc's module leaves `sched_getaffinity` out.
    static func affinityCount(root: String = "") -> Int? {
        guard let status = readFile(root + "/proc/self/status"),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Cpus_allowed_list:") })
        else {
            return nil
        }
        var count = 0
        for range in line.dropFirst("Cpus_allowed_list:".count).split(separator: ",") {
            let bounds = range.split(separator: "-").map { Int($0.trimmingCharacters(in: " \t")) }
            switch bounds.count {
            case 1: if bounds[0] != nil { count += 1 }
            case 2: if let low = bounds[0], let high = bounds[1], high >= low { count += high - low + 1 }
            default: return nil
            }
        }
        return count > 0 ? count : nil
    }

    private static func readFile(_ path: String) -> String? { readSystemFile(path) }
}

extension Substring {
    fileprivate func trimmingCharacters(in characters: String) -> Substring {
        var text = self
        while let first = text.first, characters.contains(first) { text.removeFirst() }
        while let last = text.last, characters.contains(last) { text.removeLast() }
        return text
    }
}

extension String {
    fileprivate var trimmingNewlines: Substring {
        var text = self[...]
        while let last = text.last, last == "\n" || last == " " { text.removeLast() }
        return text
    }
}

/// A small system file (`/proc`, `/sys`) as text; nil when it cannot be read.
package func readSystemFile(_ path: String) -> String? {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { break }
        bytes += chunk[..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}
