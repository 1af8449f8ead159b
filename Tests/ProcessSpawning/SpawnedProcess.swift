import CProcessSpawning
import Foundation
import Glibc
import Locking

/// How a child process ended.
package enum ProcessTermination: Sendable, Equatable, CustomStringConvertible {
    /// The process exited with this status.
    case exited(Int32)
    /// This signal ended the process.
    case signalled(Int32)

    /// Decodes a `waitpid` status word.
    init(waitStatus: Int32) {
        let signal = waitStatus & 0x7f
        self = signal == 0 ? .exited((waitStatus >> 8) & 0xff) : .signalled(signal)
    }

    package var description: String {
        switch self {
        case .exited(let status): "exit status \(status)"
        case .signalled(let signal): "signal \(signal)"
        }
    }
}

/// Why a program could not be started.
package struct SpawnFailure: Error, CustomStringConvertible {
    /// What failed and with which `errno`.
    package let description: String
}

/// A program started with `posix_spawn` for a test and ended by its PID.
///
/// Standard input is `/dev/null`; standard output is a pipe this process reads; standard error
/// is a pipe whose bytes a thread copies to this process's standard error, so a child's
/// diagnostics (a sanitizer's report in the server, say) reach the test log, yet a child that
/// outlives a crashed test process does not hold the test runner's output open (`swift test`
/// waits for that to close, and would wait as long as the child runs). No other descriptor is
/// passed on. The child starts with no blocked signals and every signal at its default action,
/// whatever the spawning thread blocks or this process ignores (Dispatch worker threads block
/// SIGTERM; SIGPIPE is ignored here), so SIGTERM ends it as it would from a shell.
///
/// Used instead of Foundation's `Process`, whose `run()` on Linux copies whole `dirent` records
/// out of `readdir`'s shorter ones while scanning `/proc/self/fd`: once enough descriptors are
/// open to fill glibc's 32 KiB directory buffer (about 1,350), the copy runs past it, a
/// heap-buffer-overflow under AddressSanitizer and a possible crash without (fixed by
/// swift-corelibs-foundation pull request 5472, in no Swift 6.3 release).
package final class SpawnedProcess: Sendable {
    /// The child's process ID.
    package let pid: pid_t
    /// Read end of the child's standard output.
    private let output: Int32
    /// Set once the child has been reaped; until then its PID cannot be reused.
    private let termination = Locked<ProcessTermination?>(nil)

    /// Starts `executable` (a path; no `PATH` search) with `arguments` and `environment`
    /// (this process's environment when nil).
    package init(executable: String, arguments: [String] = [], environment: [String: String]? = nil) throws(SpawnFailure) {
        let output = try ChildPipe()
        let errorOutput: ChildPipe
        do { errorOutput = try ChildPipe() } catch {
            output.closeBothEnds()
            throw error
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output.writeEnd, 1)
        posix_spawn_file_actions_adddup2(&actions, errorOutput.writeEnd, 2)
        spawning_add_close_from(&actions, 3)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        posix_spawnattr_setsigmask(&attributes, &unblocked)
        var everySignal = sigset_t()
        sigfillset(&everySignal)
        posix_spawnattr_setsigdefault(&attributes, &everySignal)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = CStringArray([executable] + arguments)
        let envp = environment.map { CStringArray($0.map { "\($0.key)=\($0.value)" }) }
        var pid: pid_t = 0
        let status = argv.withPointers { argv in
            if let envp {
                return envp.withPointers { posix_spawn(&pid, executable, &actions, &attributes, argv, $0) }
            }
            return posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        }
        close(output.writeEnd)
        close(errorOutput.writeEnd)
        guard status == 0 else {
            close(output.readEnd)
            close(errorOutput.readEnd)
            throw SpawnFailure(description: "posix_spawn \(executable): errno \(status)")
        }
        self.pid = pid
        self.output = output.readEnd
        let errorReadEnd = errorOutput.readEnd
        Thread.detachNewThread {
            copyUntilClosed(from: errorReadEnd, to: STDERR_FILENO)
            close(errorReadEnd)
        }
    }

    deinit {
        signal(SIGKILL)
        waitForExit()
        close(output)
    }

    // MARK: Output

    /// Blocks until the child writes to standard output; returns what it wrote (at most
    /// `maxCount` bytes), or nothing once the output is closed.
    package func readOutput(maxCount: Int = 65_536) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: maxCount) { buffer, count in
            var read: Int
            repeat { read = Glibc.read(output, buffer.baseAddress, maxCount) } while read == -1 && errno == EINTR
            count = max(read, 0)
        }
    }

    /// Reads standard output until the child closes it.
    package func readOutputToEnd() -> [UInt8] {
        var bytes: [UInt8] = []
        while case let chunk = readOutput(), !chunk.isEmpty { bytes += chunk }
        return bytes
    }

    /// Reads one line of standard output (without its newline); nil if the output ends or no
    /// newline arrives within `timeout`. Reads byte by byte, so nothing after the line is consumed.
    package func readOutputLine(timeout: Duration) -> String? {
        let deadline = ContinuousClock.now + timeout
        var line: [UInt8] = []
        while true {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else { return nil }
            var request = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            let (seconds, attoseconds) = remaining.components
            let milliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            let ready = poll(&request, 1, milliseconds)
            if ready == -1 && errno == EINTR { continue }
            guard ready == 1 else { return nil }
            guard let byte = readOutput(maxCount: 1).first else { return nil }
            if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
    }

    // MARK: Ending

    /// Sends `signal` to the child unless it has already been reaped (its PID may then belong
    /// to another process).
    package func signal(_ signal: Int32) {
        termination.withLock { termination in
            if termination == nil { _ = kill(pid, signal) }
        }
    }

    /// Blocks until the child exits and reaps it; returns how it ended. Any thread, any number
    /// of times.
    @discardableResult
    package func waitForExit() -> ProcessTermination {
        // Waits without reaping (WNOWAIT), so the PID stays this child's until it is reaped
        // below under the lock `signal(_:)` takes: a signal never reaches a reused PID.
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1 && errno == EINTR {}
        return termination.withLock { termination in
            if let termination { return termination }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            let ended = ProcessTermination(waitStatus: status)
            termination = ended
            return ended
        }
    }

    /// Waits for the child's exit on a thread of its own, leaving the concurrency pool free.
    package func waitForExit() async -> ProcessTermination {
        await onOwnThread { self.waitForExit() }
    }

    /// Runs `executable` to completion; returns how it ended and its standard output. After
    /// `timeout`, a guard against a hung child only, it is sent SIGTERM, and SIGKILL 5 s later.
    package static func run(
        _ executable: String, _ arguments: [String],
        timeout: Duration
    ) async throws -> (termination: ProcessTermination, output: [UInt8]) {
        let process = try SpawnedProcess(executable: executable, arguments: arguments)
        // Timed on a thread of its own: a timer task would fire late, or not at all, while the
        // concurrency pool's threads are blocked.
        let exited = DispatchSemaphore(value: 0)
        let seconds = timeout.timeInterval
        Thread.detachNewThread {
            guard exited.wait(timeout: .now() + seconds) == .timedOut else { return }
            process.signal(SIGTERM)
            guard exited.wait(timeout: .now() + 5) == .timedOut else { return }
            process.signal(SIGKILL)
        }
        defer { exited.signal() }
        let output = await onOwnThread { process.readOutputToEnd() }
        return (await process.waitForExit(), output)
    }
}

/// Runs blocking `work` on a new thread and returns its result.
private func onOwnThread<Result: Sendable>(_ work: @escaping @Sendable () -> Result) async -> Result {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: work()) }
    }
}

/// Both ends of a pipe created close-on-exec, so that children spawned concurrently by other
/// tests do not inherit it and keep it open past this child's exit.
private struct ChildPipe {
    let readEnd: Int32
    let writeEnd: Int32

    init() throws(SpawnFailure) {
        var ends: [Int32] = [-1, -1]
        guard spawning_pipe_close_on_exec(&ends) == 0 else { throw SpawnFailure(description: "pipe2: errno \(errno)") }
        readEnd = ends[0]
        writeEnd = ends[1]
    }

    func closeBothEnds() {
        close(readEnd)
        close(writeEnd)
    }
}

/// Copies everything read from `source` to `destination` until `source` is closed.
private func copyUntilClosed(from source: Int32, to destination: Int32) {
    var buffer = [UInt8](repeating: 0, count: 16_384)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
        if count == -1 && errno == EINTR { continue }
        guard count > 0 else { return }
        var written = 0
        while written < count {
            let result = buffer.withUnsafeBytes { write(destination, $0.baseAddress! + written, count - written) }
            if result == -1 && errno == EINTR { continue }
            guard result > 0 else { return }
            written += result
        }
    }
}

/// NUL-terminated copies of strings, in the `char *const[]` form `posix_spawn` takes.
private final class CStringArray {
    private let pointers: [UnsafeMutablePointer<CChar>?]

    init(_ strings: [String]) {
        pointers = strings.map { strdup($0) } + [nil]
    }

    deinit { pointers.forEach { free($0) } }

    func withPointers<Result>(_ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> Result) -> Result {
        pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
