import Dispatch
import Locking
import Logging
import ReactorCore
import Testing

@testable import ReactorHosting

/// A reactor that cannot keep up with its senders slows them down: past
/// ``HostingConfiguration/actionBacklogLimit`` actions taken and not applied, an acknowledgement
/// waits for its action to be applied, instead of the queue growing until a turn runs so long
/// that the instance is taken for stalled.
@Suite struct BacklogTests {
    private static let hold = Array(#"{"hold":{}}"#.utf8)
    private static func add(_ value: Int) -> [UInt8] { Array(#"{"add":{"_0":\#(value)}}"#.utf8) }

    /// A host whose `gated` type keeps each reactor it makes in `made`, newest last.
    private func makeHost(keepingIn made: Locked<[GatedReactor]>, store: (any SessionStore)?) -> ReactorHost {
        var registry = ReactorRegistry()
        registry.register("gated") {
            let reactor = GatedReactor()
            made.withLock { $0.append(reactor) }
            return reactor
        }
        var configuration = HostingConfiguration()
        configuration.reactorThreads = 1
        // Long enough never to count the held turn as a stall: the backlog is what is tested.
        configuration.stallTimeout = .seconds(3600)
        configuration.actionBacklogLimit = 3
        configuration.store = store
        configuration.durability = .sync
        return ReactorHost(registry: registry, configuration: configuration, logger: Logger(label: "test"), errorEvent: { _ in [] })
    }

    private func outcome(of ticket: CommitTicket) async -> CommitOutcome {
        await withCheckedContinuation { done in ticket.whenCommitted { done.resume(returning: $0) } }
    }

    @Test(arguments: [false, true])
    func anAcknowledgementWaitsForItsActionOnceTheReactorIsBehind(durable: Bool) async throws {
        let made = Locked<[GatedReactor]>([])
        let host = makeHost(keepingIn: made, store: durable ? InMemorySessionStore(historyCapacity: 16) : nil)
        let type = try #require(host.registry.type(named: "gated"))
        let (instance, created) = try host.create(type)
        let reactor = try #require(made.withLock { $0.last })
        if let created { #expect(await outcome(of: created) == .committed) }

        // The reactor's thread is held inside the first action's `mutate`.
        _ = try instance.send(actionJSON: Self.hold, trace: nil)
        #expect(reactor.holding.wait(timeout: .now() + 10) == .success)
        var tickets: [CommitTicket?] = []
        for value in 1...3 { tickets.append(try instance.send(actionJSON: Self.add(value), trace: nil).1) }

        // One and two actions ahead of them: acknowledged as usual (at once in memory, once
        // committed with a store).
        for ticket in tickets.prefix(2) {
            if durable {
                #expect(await outcome(of: try #require(ticket)) == .committed)
            } else {
                #expect(ticket == nil)
            }
        }
        // Three ahead: the acknowledgement waits for the reactor, even once its record is committed.
        let waiting = try #require(tickets[2])
        let heard = Locked<CommitOutcome?>(nil)
        waiting.whenCommitted { result in heard.withLock { $0 = result } }
        if durable { await withCheckedContinuation { done in host.committer!.afterCommit { done.resume() } } }
        #expect(heard.withLock { $0 } == nil)

        reactor.gate.signal()
        #expect(await outcome(of: waiting) == .committed)
        #expect(reactor.currentState.applied.starts(with: [1, 2, 3]))
        #expect(reactor.isStalled == false)
    }
}
