import Foundation
import ProcessSpawning
import TestSupport
import Testing

/// A `reactor-server` process started for a test on 127.0.0.1 with an ephemeral port, stopped
/// by its PID.
final class ServerProcess: Sendable {
    let port: UInt16
    private let process: SpawnedProcess
    /// The store of a server given none, removed with the helper (after the test has stopped it).
    private let scratch: ScratchDirectory?

    /// The built executable: `REACTOR_SERVER_BIN`, else next to the test bundle.
    static var executable: URL {
        if let path = ProcessInfo.processInfo.environment["REACTOR_SERVER_BIN"] {
            return URL(fileURLWithPath: path)
        }
        var directory = Bundle.main.bundleURL
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("reactor-server")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        let fromArgument = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        return fromArgument.appendingPathComponent("reactor-server")
    }

    /// Starts the server and waits (bounded) for the line announcing its port, on a thread of
    /// its own: a debug build takes seconds to start beside the other tests, and such waits on
    /// the concurrency pool's two threads stalled every test of the run. Unless told otherwise,
    /// it keeps its sessions in a new SQLite store of its own.
    init(arguments: [String] = [], environment: [String: String] = [:]) async throws {
        OpenFileLimit.raised
        var env = ProcessInfo.processInfo.environment
        if environment["STORE"] == nil && !arguments.contains("--store") {
            let scratch = try ScratchDirectory("reactor-server")
            env["STORE"] = "sqlite:" + scratch.path("sessions.sqlite")
            self.scratch = scratch
        } else {
            scratch = nil
        }
        for (key, value) in environment { env[key] = value }
        let process = try SpawnedProcess(
            executable: Self.executable.path,
            arguments: ["--host", "127.0.0.1", "--port", "0", "--log-level", "warning"] + arguments,
            environment: env
        )
        self.process = process
        guard let line = await onAThreadOfItsOwn({ process.readOutputLine(timeout: .seconds(60)) }),
            let portText = line.split(separator: ":").last,
            let port = UInt16(portText.trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            throw TestFailure("server did not announce its port")
        }
        self.port = port
    }

    var base: String { "http://127.0.0.1:\(port)" }
    var pid: Int32 { process.pid }

    /// Sends SIGTERM and waits for the server to exit. Anything but exit status 0 is recorded
    /// as an issue: a clean shutdown exits 0, and a sanitizer that reported in the server
    /// makes it exit non-zero.
    @discardableResult
    func stop(sourceLocation: SourceLocation = #_sourceLocation) -> ProcessTermination {
        process.signal(SIGTERM)
        let termination = process.waitForExit()
        #expect(termination == .exited(0), "reactor-server ended with \(termination)", sourceLocation: sourceLocation)
        return termination
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
