import MicroHTTP

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The process families Prometheus client libraries export (`process_cpu_seconds_total`,
/// `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`,
/// `process_max_fds`, `process_start_time_seconds`), read from `/proc` when `/metrics` is
/// rendered. Where `/proc` is missing (not Linux), they are left out.
enum ProcessMetrics {
    /// The families' text, with `# HELP` and `# TYPE`.
    static func render() -> String {
        guard let stat = SelfStat.read() else { return "" }
        var text = ""
        func family(_ name: String, _ type: String, _ help: String, _ value: String) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(value)\n"
        }
        family(
            "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
            decimal(Double(stat.userTicks + stat.systemTicks) / Double(ticksPerSecond)))
        family(
            "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
            String(stat.residentPages * Int64(sysconf(Int32(_SC_PAGESIZE)))))
        family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", String(stat.virtualBytes))
        if let open = openFileDescriptors() {
            family("process_open_fds", "gauge", "Number of open file descriptors.", String(open))
        }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            family("process_max_fds", "gauge", "Maximum number of open file descriptors.", String(limit.rlim_cur))
        }
        if let start = startTime {
            family(
                "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
                decimal(start))
        }
        return text
    }

    private static let ticksPerSecond = max(1, sysconf(Int32(_SC_CLK_TCK)))

    /// Seconds since the epoch at which the process started: the boot time plus the start's
    /// ticks after boot. Read once.
    private static let startTime: Double? = {
        guard let stat = SelfStat.read(), let text = readFile("/proc/stat") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            guard let boot = Int64(line.dropFirst("btime ".count)) else { return nil }
            return Double(boot) + Double(stat.startTicks) / Double(ticksPerSecond)
        }
        return nil
    }()

    /// The entries of `/proc/self/fd`, less the one reading it.
    private static func openFileDescriptors() -> Int? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        var count = 0
        // The name is read in place, up to its terminating zero: an entry is only as long as its
        // name, so loading the whole `dirent` (`entry.pointee`) would read past the last entry of
        // the directory's buffer, and off the end of its memory once the buffer ends a mapping.
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        let dot = UInt8(ascii: ".")
        while let entry = readdir(directory) {
            let name = UnsafeRawPointer(entry).advanced(by: nameOffset).assumingMemoryBound(to: UInt8.self)
            let isDot = name[0] == dot && (name[1] == 0 || (name[1] == dot && name[2] == 0))
            if !isDot { count += 1 }
        }
        return max(0, count - 1)
    }

    /// A number as Prometheus reads it, without a locale or an exponent for ordinary values.
    private static func decimal(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) + ".0" : String(value)
    }

    /// The parts of `/proc/self/stat` used here.
    private struct SelfStat {
        var userTicks: Int64
        var systemTicks: Int64
        var startTicks: Int64
        var virtualBytes: Int64
        var residentPages: Int64

        static func read() -> SelfStat? {
            // The command name (field 2) is in parentheses and may hold spaces: count fields
            // from the last ')'.
            guard let text = readFile("/proc/self/stat"), let close = text.lastIndex(of: ")") else { return nil }
            let fields = text[text.index(after: close)...].split(separator: " ")
            // fields[0] is field 3 (the state); field n is at n - 3.
            func field(_ number: Int) -> Int64? {
                number - 3 < fields.count ? Int64(fields[number - 3].trimmingCharacters()) : nil
            }
            guard let user = field(14), let system = field(15), let start = field(22),
                let virtual = field(23), let resident = field(24)
            else { return nil }
            return SelfStat(
                userTicks: user, systemTicks: system, startTicks: start, virtualBytes: virtual,
                residentPages: resident)
        }
    }

    /// A small file of `/proc` as text.
    private static func readFile(_ path: String) -> String? { readSystemFile(path) }
}

extension Substring {
    fileprivate func trimmingCharacters() -> Substring {
        var text = self
        while let last = text.last, last == "\n" || last == " " { text.removeLast() }
        return text
    }
}
