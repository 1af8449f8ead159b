import Dispatch
import Locking
import Logging
import ReactorExamples
import Testing

@testable import ReactorHosting

/// A session whose instance was deleted or expired stays gone while the store's deletion waits
/// for its commit: a request in between must not bring it back from the store, which still has
/// it, or its instance would outlive the session.
@Suite struct DeletionTests {
    private let store = InMemorySessionStore(historyCapacity: 16)
    private let held = HeldCommits()
    private let clock = Locked<UInt64>(1_000_000_000)

    private func makeHost() -> ReactorHost {
        var registry = ReactorRegistry()
        registry.register("counter") { CounterReactor(delay: .zero) }
        var configuration = HostingConfiguration()
        configuration.store = HookedStore(store, beforeCommit: held.pass)
        configuration.durability = .sync
        configuration.idleTimeout = .seconds(1)
        configuration.now = { [clock] in clock.withLock { $0 } }
        return ReactorHost(
            registry: registry, configuration: configuration, logger: Logger(label: "test"), errorEvent: { _ in [] })
    }

    private func committed(_ host: ReactorHost) async {
        await withCheckedContinuation { done in host.committer!.afterCommit { done.resume() } }
    }

    /// A counter whose creation is committed; the commits after it are held.
    private func storedCounter(on host: ReactorHost) async throws -> String {
        let id = try host.create(#require(host.registry.type(named: "counter"))).0.id
        await committed(host)
        held.hold()
        return id
    }

    @Test func anExpiredSessionIsNotBroughtBackWhileItsDeletionWaitsForItsCommit() async throws {
        let host = makeHost()
        defer { host.shutdown() }
        let id = try await storedCounter(on: host)
        clock.withLock { $0 += 2_000_000_000 }
        #expect(host.expireIdle().map(\.id) == [id])
        await held.untilCommitting()
        #expect(try store.contains(id: id))
        #expect(try host.instance(id: id) == nil)
        held.release()
        await committed(host)
        #expect(try !store.contains(id: id))
        #expect(try host.instance(id: id) == nil)
        #expect(host.table.count == 0)
    }

    @Test func aDeletedSessionIsNotBroughtBackWhileItsDeletionWaitsForItsCommit() async throws {
        let host = makeHost()
        defer { host.shutdown() }
        let id = try await storedCounter(on: host)
        let ticket: CommitTicket? = try #require(try host.delete(id: id))
        await held.untilCommitting()
        #expect(try host.instance(id: id) == nil)
        // Gone already: a second delete finds nothing to delete.
        let again = try host.delete(id: id)
        #expect(again == nil)
        held.release()
        if let ticket { await withCheckedContinuation { done in ticket.whenCommitted { _ in done.resume() } } }
        #expect(try !store.contains(id: id))
        #expect(try host.instance(id: id) == nil)
    }
}

/// Holds commits from `hold()` until `release()`. The test waits for a held commit without
/// blocking a thread of the concurrency pool (`untilCommitting()`); only the commit thread waits.
private final class HeldCommits: Sendable {
    private struct State {
        var holding = false
        var waiting = 0
        var arrived: CheckedContinuation<Void, Never>?
        var hasArrived = false
    }

    private let state = Locked(State())
    private let released = DispatchSemaphore(value: 0)

    /// Commits from now on wait at the gate.
    func hold() { state.withLock { $0.holding = true } }

    /// Returns once a commit waits at the gate.
    func untilCommitting() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.hasArrived { return true }
                state.arrived = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Lets the waiting commit, and every later one, through.
    func release() {
        let waiting = state.withLock { state -> Int in
            state.holding = false
            defer { state.waiting = 0 }
            return state.waiting
        }
        for _ in 0..<waiting { released.signal() }
    }

    /// Called as a commit begins, on the commit thread.
    func pass(_ writes: [SessionWrite]) {
        let (waits, arrived) = state.withLock { state -> (Bool, CheckedContinuation<Void, Never>?) in
            guard state.holding else { return (false, nil) }
            state.waiting += 1
            state.hasArrived = true
            defer { state.arrived = nil }
            return (true, state.arrived)
        }
        guard waits else { return }
        arrived?.resume()
        released.wait()
    }
}
