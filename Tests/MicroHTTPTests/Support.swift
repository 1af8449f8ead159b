import Foundation
import Locking
import MicroHTTP
import ProcessSpawning
import TestSupport
import Testing

/// Counts occurrences of an event and lets tests wait for a count, with a bounded timeout that
/// only guards against failure.
final class EventCounter: Sendable {
    private struct State {
        var count = 0
        var waiters: [(target: Int, id: Int, continuation: CheckedContinuation<Bool, Never>)] = []
        var nextID = 0
    }

    private let state = Locked(State())

    var count: Int { state.withLock { $0.count } }

    func signal() {
        let ready = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            state.count += 1
            let count = state.count
            let ready = state.waiters.filter { $0.target <= count }.map(\.continuation)
            state.waiters.removeAll { $0.target <= count }
            return ready
        }
        for continuation in ready { continuation.resume(returning: true) }
    }

    /// Waits until at least `target` signals happened; false on timeout.
    func wait(for target: Int, timeout: Duration = .seconds(20)) async -> Bool {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            self.expire(id)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            let satisfied = state.withLock { state -> Bool in
                if state.count >= target { return true }
                state.waiters.append((target, id, continuation))
                return false
            }
            if satisfied { continuation.resume(returning: true) }
        }
    }

    private func expire(_ id: Int) {
        let expired = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index).continuation
        }
        expired?.resume(returning: false)
    }
}

struct ProcessResult {
    let termination: ProcessTermination
    let output: String

    /// The last stdout line parsed as a JSON object.
    var json: [String: Any] {
        let line = output.split(separator: "\n").last.map(String.init) ?? "{}"
        return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] ?? [:]
    }
}

enum Clients {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Clients/clients.py").path

    /// Runs a program to completion (ended after `timeout` as a failure guard).
    static func run(_ executable: String, _ arguments: [String], timeout: Duration = .seconds(60)) async throws -> ProcessResult {
        let (termination, output) = try await SpawnedProcess.run(executable, arguments, timeout: timeout)
        return ProcessResult(termination: termination, output: String(decoding: output, as: UTF8.self))
    }

    static func python(_ mode: String, port: UInt16, _ arguments: [String], timeout: Duration = .seconds(60)) async throws -> ProcessResult
    {
        try await run("/usr/bin/python3", [script, mode, String(port)] + arguments, timeout: timeout)
    }

    /// Sends `raw` on a new connection to `port` and returns all the server sent until it closed
    /// the connection (as UTF-8), so that a second response head or an answer to a request hidden
    /// in `raw` would be in it.
    static func exchange(_ raw: String, port: UInt16) async throws -> ProcessResult {
        try await run(
            "/usr/bin/python3",
            [
                "-c",
                """
                import socket, sys; s = socket.create_connection(("127.0.0.1", \(port)), timeout=10)
                s.sendall(bytes(\(Array(raw.utf8))))
                data = b""
                while chunk := s.recv(65536): data += chunk
                sys.stdout.write(data.decode("utf-8", "replace"))
                """,
            ])
    }

    /// Runs curl, which gives up after `maxTime` seconds (a failure guard), the process ended
    /// after `timeout`.
    static func curl(_ arguments: [String], maxTime: Int = 20, timeout: Duration = .seconds(30)) async throws
        -> ProcessResult
    {
        try await run("/usr/bin/curl", ["-s", "--max-time", String(maxTime)] + arguments, timeout: timeout)
    }
}

/// Starts a server on 127.0.0.1 with an ephemeral port.
func startServer(_ configure: (inout HTTPServerConfiguration) -> Void = { _ in }, handler: @escaping HTTPHandler) throws -> HTTPServer {
    var configuration = HTTPServerConfiguration()
    configuration.threads = 2
    configure(&configuration)
    let server = HTTPServer(configuration: configuration, handler: handler)
    try server.start()
    return server
}

func startServer(_ configure: (inout HTTPServerConfiguration) -> Void = { _ in }, router: Router) throws -> HTTPServer {
    try startServer(configure, handler: router.handle)
}
