import Foundation

/// The test process's open-file limit, raised once to the hard limit. The suites run side by
/// side in one process, and together they hold more than a thousand descriptors at times (a test
/// of a thousand idle streams, clients' connections, the `curl` pipes); under a soft limit of
/// 1,024 the next `socket()` fails, and URLSession reports it only as "Couldn't connect to server".
public enum OpenFileLimit {
    /// Raises the soft limit to the hard one; the first use does it, later ones do nothing.
    public static let raised: Void = {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }()
}
