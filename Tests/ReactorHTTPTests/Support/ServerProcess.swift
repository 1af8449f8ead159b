import Foundation
import Synchronization

/// A `reactor-server` process started for a test on 127.0.0.1 with an ephemeral port, stopped
/// by its PID.
final class ServerProcess: Sendable {
    let port: UInt16
    private let process: Process
    private let output: Pipe

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

    /// Starts the server and waits (bounded) for the line announcing its port.
    init(arguments: [String] = [], environment: [String: String] = [:]) throws {
        let process = Process()
        process.executableURL = Self.executable
        process.arguments = ["--host", "127.0.0.1", "--port", "0", "--log-level", "warning"] + arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        self.process = process
        self.output = output
        guard let line = Self.readLine(from: output.fileHandleForReading),
              let portText = line.split(separator: ":").last,
              let port = UInt16(portText.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            process.terminate()
            throw TestFailure("server did not announce its port")
        }
        self.port = port
    }

    var base: String { "http://127.0.0.1:\(port)" }
    var pid: Int32 { process.processIdentifier }

    /// Sends SIGTERM and waits for the exit status.
    @discardableResult
    func stop() -> Int32 {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    private static func readLine(from handle: FileHandle) -> String? {
        var bytes: [UInt8] = []
        while true {
            let chunk = handle.readData(ofLength: 1)
            guard let byte = chunk.first else { return nil }
            if byte == 0x0A { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
