import Foundation
import Glibc
import Locking
import ProcessSpawning
import Testing

@Suite struct SpawnedProcessTests {
    @Test func outputAndExitStatusAreReported() async throws {
        let (termination, output) = try await SpawnedProcess.run("/bin/sh", ["-c", "echo one; echo two; exit 3"], timeout: .seconds(30))
        #expect(termination == .exited(3))
        #expect(String(decoding: output, as: UTF8.self) == "one\ntwo\n")
    }

    @Test func aLineIsReadWithoutConsumingWhatFollows() throws {
        let process = try SpawnedProcess(executable: "/bin/sh", arguments: ["-c", "printf 'port: 1234\\nrest'"])
        #expect(process.readOutputLine(timeout: .seconds(30)) == "port: 1234")
        #expect(process.readOutputToEnd() == Array("rest".utf8))
        #expect(process.waitForExit() == .exited(0))
    }

    /// A Dispatch worker thread blocks SIGTERM, and a child inherits its spawner's mask; the
    /// launcher clears it, so SIGTERM still ends the child.
    @Test func sigtermEndsAChildSpawnedFromAThreadThatBlocksIt() async throws {
        // Handed over through a lock rather than the continuation alone: ThreadSanitizer cannot
        // see the ordering a continuation's resume gives (the concurrency runtime is not
        // instrumented), so it would report the process's fields as racing.
        let spawned = Locked<Result<SpawnedProcess, SpawnFailure>?>(nil)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                var terminate = sigset_t()
                sigemptyset(&terminate)
                sigaddset(&terminate, SIGTERM)
                pthread_sigmask(SIG_BLOCK, &terminate, nil)
                let result = Result { () throws(SpawnFailure) in
                    try SpawnedProcess(executable: "/bin/sleep", arguments: ["30"])
                }
                spawned.withLock { $0 = result }
                continuation.resume()
            }
        }
        let process = try #require(spawned.withLock { $0 }).get()
        process.signal(SIGTERM)
        #expect(await process.waitForExit() == .signalled(SIGTERM))
    }

    @Test func theDeadlineEndsAHungChild() async throws {
        let clock = ContinuousClock()
        let started = clock.now
        let (termination, _) = try await SpawnedProcess.run("/bin/sleep", ["60"], timeout: .milliseconds(100))
        #expect(termination == .signalled(SIGTERM))
        #expect(clock.now - started < .seconds(30))
    }

    @Test func signallingAfterExitIsHarmless() throws {
        let process = try SpawnedProcess(executable: "/bin/true")
        #expect(process.waitForExit() == .exited(0))
        process.signal(SIGKILL)
        #expect(process.waitForExit() == .exited(0))
    }
}
