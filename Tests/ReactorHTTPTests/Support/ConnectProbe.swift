import Foundation
import TestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a plain TCP connect to the server says right after URLSession could not connect, with
/// this process's open-descriptor count and limit: the evidence that tells a server that refused
/// from a client that could not open a socket or find a local port.
///
/// FoundationNetworking reports a refused connection as `cannotConnectToHost` (-1004). Any other
/// reason libcurl could not connect (its `CURLINFO_OS_ERRNO` was not `ECONNREFUSED`, such as
/// `EMFILE` or `EADDRNOTAVAIL`) comes back as `NSURLErrorUnknown` (-1) with the text "Failed to
/// connect to …", and the errno is lost: that is the case ``isLocalConnectFailure(_:)`` matches.
struct ConnectProbe: CustomStringConvertible {
    /// The errno of the failed `socket` or `connect`, or 0.
    let failure: Int32
    /// How many descriptors this process has open, or nil when none was free to list them.
    let openDescriptors: Int?
    let descriptorLimit: rlim_t

    /// Connects to 127.0.0.1:`port` once, blocking (loopback answers at once), and closes again.
    init(port: UInt16) {
        var limit = rlimit()
        _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        descriptorLimit = limit.rlim_cur
        openDescriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count
        switch connectToLoopback(port: port) {
        case .success(let socket):
            close(socket)
            failure = 0
        case .failure(let error):
            failure = error.errno
        }
    }

    /// Whether a plain connect to the port succeeded.
    var connected: Bool { failure == 0 }

    var description: String {
        let outcome = connected ? "a plain connect succeeded" : "a plain connect failed: \(String(cString: strerror(failure)))"
        let open = openDescriptors.map(String.init) ?? "(none free to count them)"
        return "\(outcome); this process has \(open) open descriptors of \(descriptorLimit)"
    }

    /// Whether URLSession failed to connect for a reason other than a refusal: nothing of the
    /// request reached the server.
    static func isLocalConnectFailure(_ error: any Error) -> Bool {
        let error = error as NSError
        guard error.domain == NSURLErrorDomain, error.code == NSURLErrorUnknown else { return false }
        return (error.userInfo[NSLocalizedDescriptionKey] as? String)?.hasPrefix("Failed to connect to") == true
    }
}
