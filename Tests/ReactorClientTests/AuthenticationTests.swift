import Foundation
import Locking
import ReactorClient
import ReactorCore
import ReactorExamples
import ReactorHTTP
import ReactorHosting
import Testing

/// RemoteReactor against a server that authenticates its callers: a server in the test's
/// process, on a port of 127.0.0.1, whose `Authenticator` knows one good token and records the
/// token each request carried.
@Suite(.timeLimit(.minutes(1)))
struct AuthenticationTests {
    /// Accepts `good` (alice's), refuses `stale` as expired and any other token as unknown, and
    /// records what each request carried.
    final class Accounts: Authenticator {
        /// One request as the server saw it: `GET /reactors/ID/events` (ids as `ID`) and its token.
        struct Request: Equatable {
            let route: String
            let token: String?
        }

        private let log = Locked<[Request]>([])

        var requests: [Request] { log.withLock { $0 } }

        /// The tokens the requests to `route` carried, in order.
        func tokens(on route: String) -> [String?] { requests.filter { $0.route == route }.map(\.token) }

        func authenticate(_ request: AuthenticationRequest) throws(AuthenticationFailure) -> String? {
            let segments = request.path.split(separator: "/", omittingEmptySubsequences: false)
            let path = segments.enumerated().map { $0.offset == 2 ? "ID" : String($0.element) }.joined(separator: "/")
            log.withLock { $0.append(Request(route: "\(request.method) \(path)", token: request.token)) }
            switch request.token {
            case nil: return nil
            case "good": return "alice"
            case "stale": throw AuthenticationFailure("the token has expired")
            default: throw AuthenticationFailure("unknown token")
            }
        }
    }

    /// A token provider that gives `current` until it is asked to refresh, then `refreshed`
    /// (which becomes the current one); it counts the refreshes.
    final class TokenSource: Sendable {
        private struct State {
            var current: String?
            var refreshed: String?
            var calls: [Bool] = []
        }

        private let state: Locked<State>

        init(_ current: String?, refreshed: String?) {
            state = Locked(State(current: current, refreshed: refreshed))
        }

        /// What the provider is asked, in order: `true` for a refresh.
        var calls: [Bool] { state.withLock { $0.calls } }
        var refreshes: Int { calls.filter { $0 }.count }

        /// From now on it gives `current`, and `refreshed` once asked to refresh.
        func give(_ current: String?, refreshed: String?) {
            state.withLock {
                $0.current = current
                $0.refreshed = refreshed
            }
        }

        var configuration: RemoteReactorConfiguration {
            var configuration = RemoteReactorConfiguration()
            configuration.tokenProvider = { refresh in
                self.state.withLock { state in
                    state.calls.append(refresh)
                    if refresh { state.current = state.refreshed }
                    return state.current
                }
            }
            return configuration
        }
    }

    /// A started server serving the counter, which authenticates with ``Accounts``, and the
    /// ``TokenSource`` its clients are configured with; ``stop()`` it after the test.
    final class Served: Sendable {
        let accounts = Accounts()
        let tokens: TokenSource
        let server: ReactorServer
        let url: URL

        init(_ current: String?, refreshed: String?) throws {
            tokens = TokenSource(current, refreshed: refreshed)
            var registry = ReactorRegistry()
            registry.register("counter") { CounterReactor(delay: .zero) }
            var configuration = ReactorServiceConfiguration()
            configuration.reactorThreads = 1
            configuration.authentication = AuthenticationConfiguration(authenticator: accounts)
            server = ReactorServer(registry: registry, configuration: configuration)
            try server.start()
            url = try #require(URL(string: "http://127.0.0.1:\(server.port)"))
        }

        func stop() { server.shutdown() }

        /// A new counter, created with the token source's tokens.
        func create() async throws -> RemoteReactor<CounterReactor> {
            try await RemoteReactor.create(type: "counter", at: url, configuration: tokens.configuration)
        }

        /// The counter `id`, attached to with the token source's tokens.
        func attach(_ id: String) async throws -> RemoteReactor<CounterReactor> {
            try await RemoteReactor.attach(id: id, at: url, configuration: tokens.configuration)
        }
    }

    @Test func everyRequestCarriesTheTokenAndTheStreamOpensWithIt() async throws {
        let served = try Served("good", refreshed: "good")
        defer { served.stop() }
        let (accounts, tokens) = (served.accounts, served.tokens)

        let counter = try await served.create()
        let events = Recorder(counter.events)
        try await events.wait("the stream to open") { $0.lastStatus() == .connected }
        _ = try await counter.send(.increase, andWait: true)
        #expect(try await counter.send(.increase).seq == 2)
        try await events.wait("version 8 on the stream") { $0.versions().last == 8 }
        let again = try await served.attach(counter.id)
        #expect(again.currentState.value == 2)
        try await again.delete()
        try await events.waitForEnd()
        #expect(counter.endReason == .deleted)

        let requests = accounts.requests
        #expect(
            Set(requests.map(\.route)) == [
                "POST /reactors", "GET /reactors/ID/events", "POST /reactors/ID/actions", "GET /reactors/ID",
                "DELETE /reactors/ID",
            ])
        #expect(requests.allSatisfy { $0.token == "good" }, "\(requests)")
        #expect(tokens.refreshes == 0)
    }

    @Test func aStaleTokenIsRefreshedOnceAndTheRequestSucceeds() async throws {
        let served = try Served("stale", refreshed: "good")
        defer { served.stop() }
        let (accounts, tokens) = (served.accounts, served.tokens)

        let counter = try await served.create()
        #expect(tokens.calls == [false, true])
        #expect(accounts.tokens(on: "POST /reactors") == ["stale", "good"])
        #expect(try await counter.send(.increase, andWait: true).state.value == 1)
        #expect(tokens.refreshes == 1)

        // The token expires again: an action refreshes it once, and is applied once.
        tokens.give("stale", refreshed: "good")
        #expect(try await counter.send(.increase, andWait: true).state.value == 2)
        #expect(tokens.refreshes == 2)
        #expect(accounts.tokens(on: "POST /reactors/ID/actions") == ["good", "stale", "good"])

        // And again: the event stream connects again at once with a new one.
        tokens.give("stale", refreshed: "good")
        let events = Recorder(counter.events)
        try await events.wait("the stream to open") { $0.lastStatus() == .connected }
        #expect(tokens.refreshes == 3)
        #expect(accounts.tokens(on: "GET /reactors/ID/events") == ["stale", "good"])
        #expect(counter.connectionStatus == .connected)
    }

    @Test func aTokenRefusedAfterItsRefreshIsAnUnauthenticatedProblem() async throws {
        let served = try Served("forged", refreshed: "forged")
        defer { served.stop() }
        let (accounts, tokens) = (served.accounts, served.tokens)

        let refused = await #expect(throws: ReactorProblem.self) {
            try await served.create()
        }
        #expect(refused?.status == 401)
        #expect(refused?.kind == "unauthenticated")
        #expect(refused?.detail.contains("unknown token") == true)
        #expect(tokens.calls == [false, true])
        #expect(accounts.tokens(on: "POST /reactors") == ["forged", "forged"])
        #expect(served.server.service.instanceCount == 0)

        // An action: refused the same way, after one refresh, and not applied.
        tokens.give("good", refreshed: "good")
        let counter = try await served.create()
        tokens.give("forged", refreshed: "forged")
        let action = await #expect(throws: ReactorProblem.self) { try await counter.send(.increase).seq }
        #expect(action?.status == 401)
        #expect(action?.kind == "unauthenticated")
        #expect(tokens.refreshes == 2)
        #expect(accounts.tokens(on: "POST /reactors/ID/actions") == ["forged", "forged"])

        // Without a provider nothing is refreshed: the first 401 is thrown.
        let anonymous = await #expect(throws: ReactorProblem.self) {
            try await RemoteReactor<CounterReactor>.attach(id: counter.id, at: served.url)
        }
        #expect(anonymous?.status == 401)
        #expect(accounts.tokens(on: "GET /reactors/ID") == [nil])

        tokens.give("good", refreshed: "good")
        #expect(try await counter.send(.increase, andWait: true).state.value == 1)
    }

    @Test func theStreamRefusedAfterARefreshEndsUnauthenticatedInsteadOfTryingForEver() async throws {
        let served = try Served("good", refreshed: "good")
        defer { served.stop() }
        let (accounts, tokens) = (served.accounts, served.tokens)
        let counter = try await served.create()

        tokens.give("forged", refreshed: "forged")
        let ending = try await Recorder(counter.events).waitForEnd()
        guard case .ended(let reason)? = ending.last else {
            Issue.record("the events did not end with a reason: \(ending)")
            return
        }
        #expect(reason == .unauthenticated)
        #expect(reason.isFinal)
        #expect(counter.endReason == .unauthenticated)
        #expect(counter.connectionStatus == .ended)
        #expect(tokens.calls == [false, false, true])
        #expect(accounts.tokens(on: "GET /reactors/ID/events") == ["forged", "forged"])

        // The instance lives on: with a valid token again, a new client reaches it.
        tokens.give("good", refreshed: "good")
        let again = try await served.attach(counter.id)
        #expect(again.version == 0)
        #expect(served.server.service.instanceCount == 1)
    }
}
