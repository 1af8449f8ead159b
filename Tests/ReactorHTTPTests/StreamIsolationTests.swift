import Dispatch
import Foundation
import Locking
import ReactorCore
import ReactorHTTP
import ReactorHosting
import Testing

/// An event stream's connection thread may take long to build a chunk (encoding a large state,
/// computing a patch); the thread applying the instance's actions, which wakes the stream after
/// each state, must never wait for it.
@Suite struct StreamIsolationTests {
    /// Lets the test hold the encoding of one state, and tells it which states were reduced.
    final class Gate: Sendable {
        /// The value whose encoding waits for ``release``.
        static let heldValue = 1
        let encodingHeld = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let reduced = Locked<[Int]>([])
        let reducedThree = DispatchSemaphore(value: 0)
        /// The mutations the test sends, one by one, as the reactor's one action emits them.
        let mutations: AsyncStream<Int>
        let send: AsyncStream<Int>.Continuation

        init() {
            (mutations, send) = AsyncStream.makeStream(of: Int.self)
        }
    }

    /// The gate of the one test that uses it (a state's `encode(to:)` cannot be handed one).
    static let gate = Gate()

    final class GatedReactor: Reactor {
        enum Action: String, Codable, Sendable { case start }
        typealias Mutation = Int

        struct State: Codable, Sendable, Equatable {
            var value = 0

            func encode(to encoder: any Encoder) throws {
                if value == Gate.heldValue {
                    StreamIsolationTests.gate.encodingHeld.signal()
                    StreamIsolationTests.gate.release.wait()
                }
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(value, forKey: .value)
            }
        }

        let initialState = State()
        let runtime = ReactorRuntime<GatedReactor>()

        func mutate(action: Action) -> Mutations<Int> {
            .run { send in
                for await value in StreamIsolationTests.gate.mutations { send(value) }
            }
        }

        func reduce(state: State, mutation: Int) -> State {
            StreamIsolationTests.gate.reduced.withLock { $0.append(mutation) }
            if mutation == 3 { StreamIsolationTests.gate.reducedThree.signal() }
            return State(value: mutation)
        }
    }

    @Test func aStreamBusyBuildingItsNextEventNeverHoldsBackTheThreadApplyingActions() async throws {
        let gate = Self.gate
        var registry = ReactorRegistry()
        registry.register("gated", exampleActions: [.start]) { GatedReactor() }
        let server = inProcessServer(registry: registry)
        try server.start()
        defer {
            gate.send.finish()
            for _ in 0..<8 { gate.release.signal() }
            server.shutdown()
        }
        let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
        let id = try await client.create("gated")
        let stream = try EventStreamClient(url: "http://127.0.0.1:\(server.port)/reactors/\(id)/events")
        defer { stream.stop() }
        #expect(await stream.wait { !$0.isEmpty }.first?.version == 0)
        #expect(try await client.post("/reactors/\(id)/actions", #""start""#).status == 202)

        // State 1 is published; the stream's connection thread, woken, encodes it and is held there.
        gate.send.yield(1)
        #expect(gate.encodingHeld.wait(timeout: .now() + 20) == .success)
        // States 2 and 3: publishing state 2 wakes the stream again. That must not wait for the
        // connection thread, or the reactor thread never gets to reduce 3.
        gate.send.yield(2)
        gate.send.yield(3)
        let reducedInTime = gate.reducedThree.wait(timeout: .now() + 10) == .success
        #expect(reducedInTime, "the reactor thread is held back by the stream: reduced \(gate.reduced.withLock { $0 })")

        // Released, the stream goes on to the latest state.
        gate.release.signal()
        #expect(await stream.wait { $0.last?.version == 3 }.last?.json["value"] as? Int == 3)
    }
}
