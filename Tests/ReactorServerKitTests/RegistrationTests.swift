import Locking
import Testing

@testable import ReactorServerKit

/// `serve`'s registration step with an app whose `register` waits or throws: what a team writes
/// when its reactors need something first (a client of another service, a file read once).
@Suite struct RegistrationTests {
    /// A counter of actions, for a registration to have a type to register.
    final class Tally: Reactor {
        enum Action: String, Codable, Sendable { case add }
        struct State: Codable, Sendable { var count = 0 }
        let initialState = State()
        let runtime = ReactorRuntime<Tally>()
        func reduce(state: State, mutation: Action) -> State { State(count: state.count + 1) }
    }

    /// Something a registration waits for: another actor's answer.
    actor Catalog {
        func typeName() -> String { "tally" }
    }

    struct CatalogUnreachable: Error, CustomStringConvertible {
        var description: String { "the catalog at http://catalog.invalid did not answer" }
    }

    struct WaitingService: ReactorServiceApp {
        func register(_ reactors: inout ReactorRegistry, options: NoOptions) async throws {
            let name = await Catalog().typeName()
            reactors.register(name) { Tally() }
        }
    }

    struct FailingService: ReactorServiceApp {
        func register(_ reactors: inout ReactorRegistry, options: NoOptions) async throws {
            reactors.register("tally") { Tally() }
            throw CatalogUnreachable()
        }
    }

    /// A service written before `register` could wait or throw: it conforms as it was written.
    struct PlainService: ReactorServiceApp {
        func register(_ reactors: inout ReactorRegistry, options: NoOptions) {
            reactors.register("tally") { Tally() }
        }
    }

    /// Records the messages logged through it, with their level.
    struct RecordingLogHandler: LogHandler {
        let entries = Locked<[(level: Logger.Level, message: String)]>([])
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            entries.withLock { $0.append((event.level, event.message.description)) }
        }
    }

    @Test func aRegistrationThatWaitsRegistersItsTypes() async throws {
        var registry = ReactorRegistry()
        let handler = RecordingLogHandler()
        try await ServeCommand<WaitingService>.register(
            WaitingService(), in: &registry, options: NoOptions(), logger: Logger(label: "test") { _ in handler }, json: true)
        #expect(registry.names == ["tally"])
        #expect(handler.entries.withLock { $0.isEmpty })
    }

    @Test func aRegistrationThatThrowsEndsServeWithExitCodeOneAndSaysWhy() async {
        var registry = ReactorRegistry()
        let handler = RecordingLogHandler()
        await #expect(throws: ExitCode(1)) {
            try await ServeCommand<FailingService>.register(
                FailingService(), in: &registry, options: NoOptions(), logger: Logger(label: "test") { _ in handler }, json: true)
        }
        let entries = handler.entries.withLock { $0 }
        #expect(entries.map(\.level) == [.critical])
        #expect(entries.map(\.message) == ["could not register the reactor types: the catalog at http://catalog.invalid did not answer"])
    }

    @Test func aRegistrationWrittenWithoutAsyncOrThrowsStillServes() async throws {
        var registry = ReactorRegistry()
        try await ServeCommand<PlainService>.register(
            PlainService(), in: &registry, options: NoOptions(), logger: Logger(label: "test") { _ in RecordingLogHandler() }, json: true)
        #expect(registry.names == ["tally"])
    }
}
