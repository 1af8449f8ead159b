import Foundation
import Glibc
import Locking

/// A TCP relay on 127.0.0.1 in front of a server, so that a test can cut a client's
/// connections (as a network would) while the server runs on: ``cut()`` closes every relayed
/// connection and turns new ones away until ``resume()``.
final class TCPRelay: Sendable {
    /// The port the relay listens on.
    let port: UInt16
    private let listener: Int32
    private let state = Locked(State())

    private struct State {
        var open: Set<Int32> = []
        var refusing = false
        var stopped = false
    }

    /// Listens on a free port and relays each connection to `upstreamPort` on 127.0.0.1.
    init(to upstreamPort: UInt16) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw TestFailure("socket: errno \(errno)") }
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 64) == 0 else {
            close(listener)
            throw TestFailure("bind/listen: errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.listener = listener
        self.port = UInt16(bigEndian: address.sin_port)
        let state = self.state
        Thread.detachNewThread {
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else {
                    if errno == EINTR { continue }
                    return
                }
                let refused = state.withLock { $0.refusing || $0.stopped }
                guard !refused, let upstream = Self.connect(to: upstreamPort) else {
                    close(client)
                    continue
                }
                state.withLock { $0.open.formUnion([client, upstream]) }
                Self.pump(from: client, to: upstream, state: state)
                Self.pump(from: upstream, to: client, state: state)
            }
        }
    }

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Closes every relayed connection and turns new ones away.
    func cut() {
        let open = state.withLock { state in
            state.refusing = true
            return state.open
        }
        for descriptor in open { shutdown(descriptor, Int32(SHUT_RDWR)) }
    }

    /// Relays new connections again.
    func resume() {
        state.withLock { $0.refusing = false }
    }

    deinit {
        state.withLock { $0.stopped = true }
        cut()
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    /// Copies bytes from `source` to `destination` on a thread of its own until either closes,
    /// then closes both.
    private static func pump(from source: Int32, to destination: Int32, state: Locked<State>) {
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            copying: while true {
                let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
                guard count > 0 else { break }
                var written = 0
                while written < count {
                    let sent = buffer[written..<count].withUnsafeBytes { send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    guard sent > 0 else { break copying }
                    written += sent
                }
            }
            shutdown(source, Int32(SHUT_RDWR))
            shutdown(destination, Int32(SHUT_RDWR))
            // The second pump of the pair to finish closes both descriptors.
            let last = state.withLock { state -> Bool in
                guard state.open.contains(source) else { return true }
                state.open.remove(source)
                state.open.remove(destination)
                return false
            }
            if last {
                close(source)
                close(destination)
            }
        }
    }

    private static func connect(to port: UInt16) -> Int32? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            return nil
        }
        return descriptor
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}
