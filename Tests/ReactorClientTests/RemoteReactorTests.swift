import Foundation
import ReactorClient
import ReactorCore
import ReactorExamples
import Testing

/// RemoteReactor against a live reactor-server on 127.0.0.1 (one per test).
@Suite(.timeLimit(.minutes(1)))
struct RemoteReactorTests {
    @Test func createSendAndTheCountersFourStates() async throws {
        let server = try await ServerProcess()
        let counter = try await RemoteReactor<CounterReactor>.create(type: "counter", at: server.url)
        #expect(counter.type == "counter")
        #expect(counter.version == 0)
        #expect(counter.currentState == CounterReactor.State())

        #expect(try await counter.send(.increase).seq == 1)
        let states = try await counter.states.collect { $0.version == 4 }

        #expect(states.map(\.version) == [0, 1, 2, 3, 4])
        #expect(states.map(\.state.value) == [0, 0, 1, 1, 1])
        #expect(states.map(\.state.isLoading) == [false, true, true, false, false])
        #expect(states.map(\.state.$alertMessage.valueUpdatedCount) == [0, 0, 0, 0, 1])
        #expect(states.last?.state.alertMessage == "increased!")
        #expect(counter.currentState.value == 1)
    }

    @Test func createWithParametersAndTheirRefusalAsATypedError() async throws {
        let server = try await ServerProcess()
        let counter = try await RemoteReactor<CounterReactor>.create(
            type: "counter", parameters: CounterParameters(step: 3),
            at: server.url)
        #expect(counter.version == 0)
        #expect(try await counter.send(.increase, andWait: true).state.value == 3)

        struct Misspelt: Encodable, Sendable { let step = "three" }
        let refused = await #expect(throws: ReactorProblem.self) {
            try await RemoteReactor<CounterReactor>.create(type: "counter", parameters: Misspelt(), at: server.url)
        }
        #expect(refused?.status == 422)
        #expect(refused?.kind == "invalid-parameters")
        #expect(refused?.detail.contains("step") == true)
    }

    @Test func attachByIDFromASecondClient() async throws {
        let server = try await ServerProcess()
        let first = try await RemoteReactor<CounterReactor>.create(type: "counter", at: server.url)
        let second = try await RemoteReactor<CounterReactor>.attach(id: first.id, at: server.url)
        #expect(second.id == first.id)
        #expect(second.type == "counter")
        #expect(second.latest == first.latest)

        let seen = Recorder(second.states)
        _ = try await first.send(.increase, andWait: true)
        let states = try await seen.wait("version 4 on the second client") { $0.last?.version == 4 }
        #expect(states.last?.state.value == 1)
        #expect(second.currentState == first.currentState)
    }

    @Test func anActionWhoseConnectionIsCutBeforeTheAnswerIsSentAgainAndAppliedOnce() async throws {
        let server = try await ServerProcess(arguments: ["--counter-delay-ms", "300"])
        let relay = try TCPRelay(to: server.port)
        let counter = try await RemoteReactor<CounterReactor>.create(type: "counter", at: relay.url)
        let watcher = try await RemoteReactor<CounterReactor>.attach(id: counter.id, at: server.url)
        let seen = Recorder(watcher.states)
        let sent = Task { try await counter.send(.increase, andWait: true) }
        // The server has the action (it shows loading) and holds the answer for 300 ms: the
        // connection is cut then, as a network would.
        _ = try await seen.wait("the action to reach the server") { $0.contains { $0.state.isLoading } }
        relay.cut()
        relay.resume()
        let settled = try await sent.value
        #expect(settled.state.value == 1)
        #expect(!settled.state.isLoading)
        // Applied once: the first attempt's action, answered to the second.
        #expect(try await server.metric("reactor_actions_accepted_total") == 1)
        #expect(try await RemoteReactor<CounterReactor>.attach(id: counter.id, at: server.url).currentState.value == 1)
        seen.cancel()
    }

    @Test func sendAndWaitReturnsTheSettledState() async throws {
        let server = try await ServerProcess()
        let counter = try await RemoteReactor<CounterReactor>.create(type: "counter", at: server.url)

        let first = try await counter.send(.increase, andWait: true)
        #expect(first.version == 4)
        #expect(
            first.state
                == CounterReactor.State(
                    value: 1, isLoading: false,
                    alertMessage: Pulse(value: "increased!", valueUpdatedCount: 1)))
        // The same alert text again: the pulse's count tells the second from the first.
        let second = try await counter.send(.increase, andWait: true)
        #expect(second.version == 8)
        #expect(second.state.alertMessage == "increased!")
        #expect(second.state.$alertMessage.valueUpdatedCount == 2)
        #expect(counter.latest == second)
    }

    @Test func problemsBecomeTypedErrors() async throws {
        let server = try await ServerProcess(arguments: ["--max-body-bytes", "4096"])
        let unknownID = await #expect(throws: ReactorProblem.self) {
            try await RemoteReactor<CounterReactor>.attach(id: "AAAAAAAAAAAAAAAAAAAAAA", at: server.url)
        }
        #expect(unknownID?.status == 404)
        #expect(unknownID?.kind == "unknown-instance")
        #expect(unknownID?.type == "urn:reactor-server:problem:unknown-instance")
        #expect(unknownID?.title == "Unknown reactor instance")
        #expect(unknownID?.detail.contains("AAAAAAAAAAAAAAAAAAAAAA") == true)

        let unknownType = await #expect(throws: ReactorProblem.self) {
            try await RemoteReactor<CounterReactor>.create(type: "no-such-type", at: server.url)
        }
        #expect(unknownType?.status == 400)
        #expect(unknownType?.kind == "unknown-type")

        let counter = try await RemoteReactor<CounterReactor>.create(type: "counter", at: server.url)
        let outdated = try await RemoteReactor<OutdatedCounter>.attach(id: counter.id, at: server.url)
        let unknownAction = await #expect(throws: ReactorProblem.self) { try await outdated.send(.reset).seq }
        #expect(unknownAction?.status == 400)
        #expect(unknownAction?.kind == "invalid-action")
        #expect(unknownAction?.title == "Invalid action")
        #expect(unknownAction?.detail.isEmpty == false)

        let oversize = await #expect(throws: ReactorProblem.self) {
            try await outdated.send(.note(String(repeating: "x", count: 10_000))).seq
        }
        #expect(oversize?.status == 413)
        #expect(oversize?.kind == "body-too-large")

        // The refusals changed nothing, and the instance takes actions as before.
        #expect(try await outdated.send(.increase).seq == 1)
    }

    @Test func resumesWithNoMissingVersionAfterTheConnectionIsCut() async throws {
        let server = try await ServerProcess()
        let relay = try TCPRelay(to: server.port)
        let watcher = try await RemoteReactor<CounterReactor>.create(type: "counter", at: relay.url)
        let sender = try await RemoteReactor<CounterReactor>.attach(id: watcher.id, at: server.url)
        let events = Recorder(watcher.events)
        _ = try await sender.send(.increase, andWait: true)
        try await events.wait("version 4") { $0.versions().last == 4 }

        relay.cut()
        try await events.wait("the stream to drop") { $0.lastStatus() == .reconnecting }
        // Eight versions the watcher misses while it is cut off.
        _ = try await sender.send(.increase, andWait: true)
        _ = try await sender.send(.increase, andWait: true)
        relay.resume()

        let seen = try await events.wait("version 12") { $0.versions().last == 12 }
        #expect(seen.versions() == Array(0...12))
        #expect(seen.compactMap(\.status).suffix(2) == [.reconnecting, .connected])
        #expect(watcher.currentState.value == 3)
    }

    @Test func continuesAcrossAServerRestartOnADurableStore() async throws {
        let server = try await ServerProcess()
        let counter = try await RemoteReactor<CounterReactor>.create(type: "counter", at: server.url)
        let events = Recorder(counter.events)
        try await events.wait("the stream to open") { $0.lastStatus() == .connected }
        _ = try await counter.send(.increase, andWait: true)
        try await events.wait("version 4") { $0.versions().last == 4 }

        await server.stop()
        try await events.wait("the stream to drop") { $0.lastStatus() == .reconnecting }
        try await server.restart()

        let settled = try await counter.send(.increase, andWait: true)
        #expect(settled.version == 8)
        #expect(settled.state.value == 2)
        let seen = try await events.wait("the stream to reopen") { $0.lastStatus() == .connected }
        let versions = seen.versions()
        #expect(versions == Array(Set(versions)).sorted())
        #expect(versions.last == 8)
        #expect(counter.endReason == nil)
    }

    @Test func takesTheServersStateWhenTheServerWentBackToAnEarlierVersion() async throws {
        let server = try await ServerProcess()
        let counter = try await RemoteReactor<CounterReactor>.create(type: "counter", at: server.url)
        _ = try await counter.send(.increase, andWait: true)
        let backup = try await server.backUp()
        let events = Recorder(counter.events)
        try await events.wait("the stream to open") { $0.lastStatus() == .connected }
        _ = try await counter.send(.increase, andWait: true)
        try await events.wait("version 8") { $0.versions().last == 8 }

        // The store is lost and restored from the backup, at version 4: versions 5–8 are gone,
        // and nothing says the server had reached them.
        await server.stop()
        try await events.wait("the stream to drop") { $0.lastStatus() == .reconnecting }
        try server.loseStore()
        try await server.restore(from: backup)
        try await server.restart()
        try await events.wait("the server's state, though older") { $0.versions().last == 4 }
        #expect(counter.version == 4)
        #expect(counter.currentState.value == 1)

        // And it follows the server from there.
        let settled = try await counter.send(.increase, andWait: true)
        #expect(settled.version == 8)
        #expect(settled.state.value == 2)
        try await events.wait("the new version 8") { $0.versions().last == 8 }
        #expect(counter.currentState.value == 2)
    }

    @Test func anActionSentWhileTheServerIsDownIsDeliveredOnce() async throws {
        let server = try await ServerProcess()
        let counter = try await RemoteReactor<CounterReactor>.create(type: "counter", at: server.url)
        await server.stop()

        let queued = counter.send(.increase)
        #expect(counter.queuedActionCount == 1)
        try await observe("the action to find the server down") { counter.isWaitingForServer }
        #expect(!queued.isSettled)
        try await server.restart()

        #expect(try await within(.seconds(30), "the queued action's seq") { try await queued.seq } == 1)
        #expect(counter.queuedActionCount == 0)
        #expect(!counter.isWaitingForServer)
        // Applied once: the next increase makes 2.
        let settled = try await counter.send(.increase, andWait: true)
        #expect(settled.state.value == 2)
    }

    @Test func theQueueIsBounded() async throws {
        let server = try await ServerProcess()
        let configuration = RemoteReactorConfiguration(queueCapacity: 2)
        let counter = try await RemoteReactor<CounterReactor>.create(
            type: "counter", at: server.url,
            configuration: configuration)
        await server.stop()
        let queued = [counter.send(.increase), counter.send(.increase)]
        let refused = counter.send(.increase)
        await #expect(throws: RemoteReactorError.queueFull(limit: 2)) { try await refused.seq }
        counter.close()
        for action in queued {
            await #expect(throws: RemoteReactorError.closed) { try await action.seq }
        }
    }

    @Test func deletionEndsTheStatesWithTheReason() async throws {
        let server = try await ServerProcess()
        let counter = try await RemoteReactor<CounterReactor>.create(type: "counter", at: server.url)
        let other = try await RemoteReactor<CounterReactor>.attach(id: counter.id, at: server.url)
        let states = Recorder(counter.states)
        let events = Recorder(counter.events)
        try await events.wait("the stream to open") { $0.lastStatus() == .connected }

        try await other.delete()
        #expect(try await states.waitForEnd().map(\.version) == [0])
        let ending = try await events.waitForEnd()
        guard case .ended(let reason)? = ending.last else {
            Issue.record("the events did not end with the reason: \(ending)")
            return
        }
        #expect(reason == .deleted)
        #expect(counter.endReason == .deleted)
        #expect(counter.connectionStatus == .ended)
        await #expect(throws: RemoteReactorError.ended(.deleted)) { try await counter.send(.increase).seq }
        // A new iteration gets the last state and ends at once.
        #expect(try await counter.states.collect().map(\.version) == [0])
    }

    @Test func cancellingTheConsumerClosesTheConnection() async throws {
        // The server sees the client close its connection at once, not at the next heartbeat
        // (15 s by default, beyond this test's bound).
        let server = try await ServerProcess()
        let counter = try await RemoteReactor<CounterReactor>.create(type: "counter", at: server.url)
        #expect(try await server.metric("reactor_event_streams") == 0)

        let events = Recorder(counter.events)
        try await events.wait("the stream to open") { $0.lastStatus() == .connected }
        #expect(try await server.metric("reactor_event_streams") == 1)

        events.cancel()
        try await within(.seconds(10), "the server to see the stream close") {
            while try await server.metric("reactor_event_streams") != 0 {
                try await Task.sleep(for: .milliseconds(20))  // between two reads of the gauge
            }
        }
        #expect(counter.connectionStatus == .idle)
    }
}
