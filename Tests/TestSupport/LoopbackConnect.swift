import Glibc

/// A TCP socket connected to 127.0.0.1:`port` (blocking; loopback answers at once), or the errno
/// of the `socket` or `connect` that failed. The caller closes the socket.
public func connectToLoopback(port: UInt16) -> Result<Int32, LoopbackConnectFailure> {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard socket >= 0 else { return .failure(LoopbackConnectFailure(errno: errno)) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let result = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard result == 0 else {
        let failure = errno
        Glibc.close(socket)
        return .failure(LoopbackConnectFailure(errno: failure))
    }
    return .success(socket)
}

/// Why ``connectToLoopback(port:)`` could not connect.
public struct LoopbackConnectFailure: Error, Equatable {
    public let errno: Int32
}
