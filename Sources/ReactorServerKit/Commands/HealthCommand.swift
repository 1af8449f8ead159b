import ArgumentParser
import Foundation
import Glibc

/// `reactor-server health`: asks the running server's `/healthz` (with `--ready`, its `/readyz`)
/// and exits 0 when it answers 200, 1 otherwise: a container health check that needs neither
/// curl nor the port. The server writes the address it listens on to `--address-file`
/// (ADDRESS_FILE) once it listens, so the check follows a port set by `--port` as well as by
/// `PORT`. `--url` names the address instead, for a server run by hand (`make run`).
struct HealthCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "health",
        abstract: "Checks the running server's /healthz (or /readyz): exit status 0 when it answers 200, 1 otherwise.",
        discussion: """
            The server must run with --address-file (ADDRESS_FILE); the check reads the address from the same file. \
            Or name the address with --url (reactor-server health --url http://127.0.0.1:8080).
            """
    )

    @Option(help: "The file the server wrote its address to (ADDRESS_FILE).")
    var addressFile: String = ServiceEnvironment.string("ADDRESS_FILE", default: "")

    @Option(help: "The server's address, http://HOST:PORT, in place of an address file.")
    var url: String?

    @Option(help: "Seconds to wait for the answer.")
    var timeoutS: Int = 3

    @Flag(help: "Ask /readyz instead: whether the server should be sent new work (its session store answers).")
    var ready = false

    func validate() throws {
        if let url {
            guard ListenAddress(url) != nil else {
                throw ValidationError("--url must be http://HOST:PORT (an IPv6 host in brackets), not '\(url)'")
            }
        } else if addressFile.isEmpty {
            throw ValidationError(
                "--address-file (ADDRESS_FILE) names no file and there is no --url: the server's address is unknown")
        }
    }

    func run() throws {
        let path = ready ? "/readyz" : "/healthz"
        let (good, bad) = ready ? ("ready", "not ready") : ("healthy", "unhealthy")
        let address: ListenAddress
        if let url, let named = ListenAddress(url) {
            address = named
        } else if let text = try? String(contentsOfFile: addressFile, encoding: .utf8),
            let written = ListenAddress(text.trimmingCharacters(in: .whitespacesAndNewlines))
        {
            address = written
        } else {
            print("\(bad): no server address in \(addressFile)")
            throw ExitCode(1)
        }
        let status = address.status(of: path, timeoutSeconds: max(1, timeoutS))
        guard status == 200 else {
            print("\(bad): \(address.url)\(path) " + (status.map { "answered \($0)" } ?? "did not answer"))
            throw ExitCode(1)
        }
        print("\(good): \(address.url)\(path) answered 200")
    }
}

/// `http://HOST:PORT` as the server writes it, and how to reach it from the same machine.
struct ListenAddress {
    let host: String
    let port: UInt16

    init?(_ url: String) {
        guard url.hasPrefix("http://") else { return nil }
        var rest = url.dropFirst("http://".count)
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard let colon = rest.lastIndex(of: ":"), let port = UInt16(rest[rest.index(after: colon)...]) else { return nil }
        var host = String(rest[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        self.host = host
        self.port = port
    }

    init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// `http://HOST:PORT`, an IPv6 address in brackets.
    var url: String { "http://\(host.contains(":") ? "[\(host)]" : host):\(port)" }

    /// Where a client on this machine connects: the loopback address for a wildcard one.
    private var connectHost: String {
        switch host {
        case "0.0.0.0": return "127.0.0.1"
        case "::", "[::]": return "::1"
        default: return host
        }
    }

    /// The status of `GET path`, nil when there is no answer within the timeout.
    func status(of path: String, timeoutSeconds: Int) -> Int? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(connectHost, String(port), &hints, &list) == 0, let list else { return nil }
        defer { freeaddrinfo(list) }
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let current = entry {
            entry = current.pointee.ai_next
            let socket = Glibc.socket(current.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard socket >= 0 else { continue }
            defer { close(socket) }
            var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
            setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            guard connect(socket, current.pointee.ai_addr, current.pointee.ai_addrlen) == 0 else { continue }
            let request = Array("GET \(path) HTTP/1.1\r\nHost: \(connectHost)\r\nConnection: close\r\n\r\n".utf8)
            guard request.withUnsafeBytes({ send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else {
                continue
            }
            // The status line is all that is needed: "HTTP/1.1 200 OK".
            var answer: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 512)
            while !answer.contains(UInt8(ascii: "\n")) {
                let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { break }
                answer += chunk[..<count]
            }
            let statusLine = String(decoding: answer.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }, as: UTF8.self)
            let parts = statusLine.split(separator: " ")
            if parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) { return status }
        }
        return nil
    }
}
