import Glibc

/// A plain TCP connection to 127.0.0.1:`port`, for bytes no HTTP client would send.
public final class RawConnection: Sendable {
    private let socket: Int32

    /// Connects, blocking (loopback answers at once); reads wait at most 10 s. Nil when the
    /// socket or connect fails.
    public init?(port: UInt16) {
        guard case .success(let socket) = connectToLoopback(port: port) else { return nil }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        _ = setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        self.socket = socket
    }

    deinit { Glibc.close(socket) }

    /// Sends `text` whole; false when the connection failed.
    public func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }

    /// What the server sends until it closes the connection (or 10 s pass without a byte).
    public func receiveAll() -> String {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.recv(socket, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            received += buffer[..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }
}
