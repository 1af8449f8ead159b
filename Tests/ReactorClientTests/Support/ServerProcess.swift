import Foundation
import Locking
import ProcessSpawning
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A `reactor-server` for one test, on 127.0.0.1, keeping its sessions in a SQLite file of its
/// own. It can be stopped (SIGTERM) and started again on the same port with the same store,
/// which is how the tests restart the server under a connected client.
///
/// Starting and stopping wait for the process on a thread of their own: a debug build takes
/// seconds to start beside the other tests, and two such waits on the concurrency pool's two
/// threads stalled every test of the run.
final class ServerProcess: Sendable {
    /// The port, chosen by the first start (port 0) and kept by the restarts.
    let port: UInt16
    private let arguments: [String]
    private let process: Locked<SpawnedProcess?>
    /// The `--store` value.
    private let store: String
    /// Holds the store and the backups; removed after the server has stopped.
    private let scratch: ScratchDirectory

    /// The built executable: `REACTOR_SERVER_BIN`, else next to the test bundle.
    static var executable: String {
        if let path = ProcessInfo.processInfo.environment["REACTOR_SERVER_BIN"] { return path }
        var directory = Bundle.main.bundleURL
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("reactor-server").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("reactor-server").path
    }

    /// Starts a server whose counter changes 20 ms after each action, with `arguments` added.
    init(arguments: [String] = []) async throws {
        OpenFileLimit.raised
        scratch = try ScratchDirectory("reactor-client")
        store = "sqlite:" + scratch.path("sessions.sqlite")
        self.arguments =
            [
                "--host", "127.0.0.1", "--log-level", "warning", "--counter-delay-ms", "20",
                "--store", store,
            ] + arguments
        let (process, port) = try await Self.start(self.arguments + ["--port", "0"])
        self.port = port
        self.process = Locked(process)
    }

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Stops the server with SIGTERM (streams end with `shutdown`) and waits for it to exit 0.
    func stop(sourceLocation: SourceLocation = #_sourceLocation) async {
        guard let process = process.withLock({ $0.take() }) else { return }
        process.signal(SIGTERM)
        let termination = await onAThreadOfItsOwn { process.waitForExit() }
        #expect(termination == .exited(0), "reactor-server ended with \(termination)", sourceLocation: sourceLocation)
    }

    /// Starts the server again on the same port with the same store.
    func restart() async throws {
        let (process, _) = try await Self.start(arguments + ["--port", String(port)])
        self.process.withLock { $0 = process }
    }

    /// Backs the running server's store up with `reactor-server backup`; returns the file.
    func backUp() async throws -> String {
        let file = scratch.path("backup-\(UUID().uuidString).sqlite")
        try await run(["backup", file, "--store", store])
        return file
    }

    /// Deletes the stopped server's store, its write-ahead log with it, as a lost disk would.
    func loseStore() throws {
        let path = String(store.dropFirst("sqlite:".count))
        for file in [path, path + "-wal", path + "-shm"] where FileManager.default.fileExists(atPath: file) {
            try FileManager.default.removeItem(atPath: file)
        }
    }

    /// Puts `backup` in place of the stopped server's store with `reactor-server restore`: the
    /// sessions go back to what they were when it was taken.
    func restore(from backup: String) async throws {
        try await run(["restore", backup, "--store", store])
    }

    private func run(_ command: [String]) async throws {
        let (termination, output) = try await SpawnedProcess.run(Self.executable, command, timeout: .seconds(60))
        guard termination == .exited(0) else {
            throw TestFailure("reactor-server \(command[0]) ended with \(termination): \(String(decoding: output, as: UTF8.self))")
        }
    }

    /// The server's `/metrics` value of `name` (a metric without labels).
    func metric(_ name: String) async throws -> Double? {
        let (data, _) = try await URLSession.shared.data(from: url.appendingPathComponent("metrics"))
        let line = String(decoding: data, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return line?.split(separator: " ").last.flatMap { Double($0) }
    }

    /// Starts the executable and waits (bounded) for the line announcing its port.
    private static func start(_ arguments: [String]) async throws -> (SpawnedProcess, UInt16) {
        let process = try SpawnedProcess(executable: executable, arguments: arguments)
        guard let line = await onAThreadOfItsOwn({ process.readOutputLine(timeout: .seconds(60)) }),
            let port = line.split(separator: ":").last.flatMap({ UInt16($0.trimmingCharacters(in: .whitespacesAndNewlines)) })
        else {
            throw TestFailure("reactor-server did not announce its port")
        }
        return (process, port)
    }

    /// A server the test did not stop: stopped here, and its exit checked. This wait blocks the
    /// thread the test ends on, as a `deinit` cannot await; a stop is a short wait.
    deinit {
        guard let process = process.withLock({ $0.take() }) else { return }
        process.signal(SIGTERM)
        let termination = process.waitForExit()
        #expect(termination == .exited(0), "reactor-server ended with \(termination)")
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
