import Foundation
import Logging
import MicroHTTP
import ReactorCore
import ReactorExamples
import ReactorHosting
import Synchronization
import Testing

@testable import ReactorHTTP

/// A reactor whose mutations misbehave on purpose: they throw, never end, or loop.
final class HostileReactor: Reactor {
    enum Action: String, Codable, Sendable {
        /// A mutation that throws.
        case fail
        /// A mutation that awaits forever (until the instance is disposed).
        case hang
        /// A mutation that loops forever, yielding between turns.
        case spin
        /// A mutation that loops forever without yielding, checking only for cancellation.
        case burn
        /// A `mutate` that never returns until the test thaws it: blocked on a semaphore.
        case freeze
        /// A `mutate` that never returns until the test thaws it: a busy loop.
        case loop
        /// An ordinary mutation.
        case tick
    }

    enum Mutation: Sendable { case tick }

    struct State: Codable, Sendable, Equatable { var ticks = 0 }

    struct Failure: Error, CustomStringConvertible {
        var description: String { "the mutation failed on purpose" }
    }

    /// How many looping or hanging mutations are running in the whole process.
    static let running = Atomic<Int>(0)
    /// How many `mutate` calls are frozen (inside `.freeze` or `.loop`).
    static let frozen = Atomic<Int>(0)
    /// Opened once per frozen `.freeze` to let it return.
    static let thawFreeze = DispatchSemaphore(value: 0)
    /// Lets every `.loop` return.
    static let thawLoops = Atomic<Bool>(false)

    let initialState = State()
    let runtime = ReactorRuntime<HostileReactor>()

    func mutate(action: Action) -> Mutations<Mutation> {
        switch action {
        case .fail:
            return .fail(Failure())
        case .hang:
            return .run { _ in
                Self.running.add(1, ordering: .relaxed)
                defer { Self.running.subtract(1, ordering: .relaxed) }
                try await Task.sleep(for: .seconds(86_400))
            }
        case .spin:
            return .run { _ in
                Self.running.add(1, ordering: .relaxed)
                defer { Self.running.subtract(1, ordering: .relaxed) }
                while !Task.isCancelled { await Task.yield() }
            }
        case .burn:
            return .run { _ in
                Self.running.add(1, ordering: .relaxed)
                defer { Self.running.subtract(1, ordering: .relaxed) }
                var turns: UInt64 = 0
                while !Task.isCancelled { turns &+= 1 }
                _ = turns
            }
        case .freeze:
            Self.frozen.add(1, ordering: .relaxed)
            Self.thawFreeze.wait()
            Self.frozen.subtract(1, ordering: .relaxed)
            return .empty
        case .loop:
            Self.frozen.add(1, ordering: .relaxed)
            while !Self.thawLoops.load(ordering: .relaxed) {}
            Self.frozen.subtract(1, ordering: .relaxed)
            return .empty
        case .tick:
            return .just(.tick)
        }
    }

    func reduce(state: State, mutation: Mutation) -> State {
        var state = state
        state.ticks += 1
        return state
    }
}

/// Isolation: what one instance's mutations do cannot stall another instance.
@Suite(.serialized) struct HardeningIsolationTests {
    func makeServer(stallTimeout: Duration = .seconds(1)) throws -> ReactorServer {
        var registry = ReactorRegistry()
        registry.register("hostile") { HostileReactor() }
        registry.register("counter", exampleActions: CounterReactor.exampleActions) { CounterReactor(delay: .zero) }
        var configuration = ReactorServiceConfiguration()
        // Short enough that the wait on a mutation that never ends answers soon, long enough that
        // a loaded machine (sanitizers, every suite at once) answers the others' waits within it.
        configuration.waitTimeout = .seconds(2)
        configuration.heartbeatInterval = .milliseconds(200)
        configuration.reactorThreads = 2
        configuration.stallTimeout = stallTimeout
        var logger = Logger(label: "hardening")
        logger.logLevel = .warning
        let server = ReactorServer(registry: registry, configuration: configuration, logger: logger)
        try server.start()
        return server
    }

    @Test func aThrowingMutationIsReportedAndTheInstanceKeepsWorking() async throws {
        let server = try makeServer()
        defer { server.shutdown() }
        let base = "http://127.0.0.1:\(server.port)"
        let client = HTTPClient(base: base)
        let hostile = try await client.create("hostile")
        let other = try await client.create("counter")
        let stream = try EventStreamClient(url: "\(base)/reactors/\(hostile)/events")
        defer { stream.stop() }
        await stream.wait { !$0.isEmpty }

        #expect(try await client.post("/reactors/\(hostile)/actions", #""fail""#).status == 202)
        let events = await stream.wait { $0.contains { $0.name == "error" } }
        let error = try #require(events.first { $0.name == "error" })
        #expect((error.json["type"] as? String)?.hasSuffix("mutation-failed") == true)

        let ticked = try await client.post("/reactors/\(hostile)/actions?wait=true", #""tick""#)
        #expect(ticked.status == 200)
        #expect((ticked.json["state"] as? [String: Any])?["ticks"] as? Int == 1)
        #expect(try await client.post("/reactors/\(other)/actions?wait=true", #""increase""#).status == 200)
    }

    @Test func hangingAndLoopingMutationsDoNotStallOtherInstances() async throws {
        let server = try makeServer()
        defer { server.shutdown() }
        let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
        let runningBefore = HostileReactor.running.load(ordering: .relaxed)

        // Four instances, each with a mutation that never ends and one that loops forever,
        // and one with a loop that never yields its thread.
        var hostiles: [String] = []
        for _ in 0..<4 {
            let id = try await client.create("hostile")
            hostiles.append(id)
            #expect(try await client.post("/reactors/\(id)/actions", #""hang""#).status == 202)
            #expect(try await client.post("/reactors/\(id)/actions", #""spin""#).status == 202)
        }
        #expect(try await client.post("/reactors/\(hostiles[0])/actions", #""burn""#).status == 202)
        try await waitUntil { HostileReactor.running.load(ordering: .relaxed) >= runningBefore + 9 }

        // A wait on a mutation that never ends is answered 202 at the wait timeout.
        let waited = try await client.post("/reactors/\(hostiles[1])/actions?wait=true", #""hang""#)
        #expect(waited.status == 202)

        // Every other instance is answered, and so are the hostile instances' ordinary actions.
        let clock = ContinuousClock()
        var latencies: [Duration] = []
        for round in 0..<40 {
            let id = try await client.create("counter")
            let started = clock.now
            let reply = try await client.post("/reactors/\(id)/actions?wait=true", #""increase""#)
            latencies.append(clock.now - started)
            #expect(reply.status == 200)
            #expect((reply.json["state"] as? [String: Any])?["value"] as? Int == 1)
            let hostile = hostiles[round % hostiles.count]
            #expect(try await client.post("/reactors/\(hostile)/actions?wait=true", #""tick""#).status == 200)
        }
        latencies.sort()
        print("isolation: wait=true on other instances, p50 \(latencies[latencies.count / 2]), max \(latencies.last!)")

        // Deleting the instances cancels their endless work.
        for id in hostiles {
            #expect(try await client.send("DELETE", "/reactors/\(id)").status == 204)
        }
        try await waitUntil { HostileReactor.running.load(ordering: .relaxed) == runningBefore }
    }

    @Test func aMutateThatNeverReturnsStallsOnlyItsOwnInstance() async throws {
        let server = try makeServer(stallTimeout: .milliseconds(100))
        defer { server.shutdown() }
        let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
        HostileReactor.thawLoops.store(false, ordering: .relaxed)

        // Three instances whose mutate never returns: more than the two threads applying actions.
        var frozen: [String] = []
        for action in ["loop", "freeze", "freeze"] {
            let id = try await client.create("hostile")
            frozen.append(id)
            #expect(try await client.post("/reactors/\(id)/actions", #""\#(action)""#).status == 202)
        }
        try await waitUntil { HostileReactor.frozen.load(ordering: .relaxed) == 3 }
        try await waitUntil { server.service.stalledInstanceCount == 3 }

        // Their new actions are refused, not queued behind a call that may never return.
        for id in frozen {
            let refused = try await client.post("/reactors/\(id)/actions", #""tick""#)
            #expect(refused.status == 503)
            #expect(refused.header("Content-Type") == "application/problem+json")
            #expect((refused.json["type"] as? String)?.hasSuffix("instance-stalled") == true)
            #expect(refused.header("Retry-After") == "1")
            #expect(try await client.get("/reactors/\(id)").status == 200, "reads go on")
        }
        let metrics = try await client.get("/metrics").text
        #expect(metrics.contains("reactor_stalled_instances 3"))

        // Every other instance is created, applies actions and answers.
        for _ in 0..<20 {
            let id = try await client.create("counter")
            let reply = try await client.post("/reactors/\(id)/actions?wait=true", #""increase""#)
            #expect(reply.status == 200)
            #expect((reply.json["state"] as? [String: Any])?["value"] as? Int == 1)
        }

        // Once the calls return, the instances take actions again; refused ones were not applied.
        HostileReactor.thawLoops.store(true, ordering: .relaxed)
        HostileReactor.thawFreeze.signal()
        HostileReactor.thawFreeze.signal()
        try await waitUntil { server.service.stalledInstanceCount == 0 }
        for id in frozen {
            let ticked = try await client.post("/reactors/\(id)/actions?wait=true", #""tick""#)
            #expect(ticked.status == 200)
            #expect((ticked.json["state"] as? [String: Any])?["ticks"] as? Int == 1)
        }
    }

    @Test func nothingListsInstancesAndIdsDoNotRepeat() async throws {
        let server = try makeServer()
        defer { server.shutdown() }
        let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
        var ids: Set<String> = []
        for _ in 0..<50 { ids.insert(try await client.create("counter")) }
        #expect(ids.count == 50)
        for path in ["/reactors", "/reactors/", "/types", "/metrics", "/healthz"] {
            let reply = try await client.get(path)
            #expect(!ids.contains { reply.text.contains($0) }, "\(path) names an instance")
        }
    }
}
