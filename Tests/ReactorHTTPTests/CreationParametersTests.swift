import Foundation
import Locking
import ReactorCore
import ReactorHTTP
import ReactorHosting
import Testing

/// `POST /reactors {"type":…,"parameters":{…}}`: parameters decoded as the registration's type,
/// refused with 422 naming the field (creating nothing), stored with the session and given to the
/// factory again, with the same creation context, whenever the session is brought back.
@Suite struct CreationParametersTests {
    /// ReactorKit's everyday case: a reactor made for one user.
    final class ProfileReactor: Reactor {
        enum Action: String, Codable, Sendable { case greet }
        struct State: Codable, Sendable, Equatable {
            var userID: String
            var greetings: [String] = []
        }

        let initialState: State
        let runtime = ReactorRuntime<ProfileReactor>()

        init(userID: String) { initialState = State(userID: userID) }

        func reduce(state: State, mutation: Action) -> State {
            var state = state
            // The greeting names the user the factory was given, not one read back from the state.
            state.greetings.append("hello \(initialState.userID)")
            return state
        }
    }

    struct ProfileParameters: Codable, Sendable, Equatable {
        var userID: String
        var age: Int?
    }

    struct Refusal: Error, CustomStringConvertible {
        var description: String { "userID must not be empty" }
    }

    /// The factory's calls, as it saw them.
    final class FactoryCalls: Sendable {
        let calls = Locked<[(ProfileParameters, CreationContext)]>([])
        var all: [(ProfileParameters, CreationContext)] { calls.withLock { $0 } }
    }

    static func registry(recording calls: FactoryCalls) -> ReactorRegistry {
        var registry = ReactorRegistry()
        registry.register(
            "profile", summary: "a user's profile", exampleActions: [ProfileReactor.Action.greet],
            exampleParameters: ProfileParameters(userID: "example")
        ) { (parameters: ProfileParameters, context) in
            guard !parameters.userID.isEmpty else { throw Refusal() }
            calls.calls.withLock { $0.append((parameters, context)) }
            return ProfileReactor(userID: parameters.userID)
        }
        registry.register("plain") { ProfileReactor(userID: "nobody") }
        return registry
    }

    @Test func parametersMakeTheReactorAndAreStoredWithTheSession() async throws {
        let calls = FactoryCalls()
        let store = InMemorySessionStore(historyCapacity: 16)
        let first = inProcessServer(registry: Self.registry(recording: calls)) { $0.store = store }
        try first.start()
        let client = HTTPClient(base: "http://127.0.0.1:\(first.port)")
        let created = try await client.post(
            "/reactors", #"{"type":"profile","parameters":{"userID":"ada","age":36}}"#,
            headers: ["Idempotency-Key": "create-1"])
        #expect(created.status == 201)
        let id = try #require(created.json["id"] as? String)
        #expect((created.json["state"] as? [String: Any])?["userID"] as? String == "ada")
        #expect(try await client.post("/reactors/\(id)/actions?wait=true", #""greet""#).status == 200)
        first.shutdown()

        // Another process on the same store: the session comes back through the factory, made
        // with the parameters and context it was created with.
        let second = inProcessServer(registry: Self.registry(recording: calls)) { $0.store = store }
        // (Registering calls the factory once, with the example parameters, for `GET /types`.)
        let before = calls.all.count
        try second.start()
        defer { second.shutdown() }
        let again = HTTPClient(base: "http://127.0.0.1:\(second.port)")
        let greeted = try await again.post("/reactors/\(id)/actions?wait=true", #""greet""#)
        #expect(greeted.status == 200)
        #expect((greeted.json["state"] as? [String: Any])?["greetings"] as? [String] == ["hello ada", "hello ada"])
        let activation = try #require(calls.all.dropFirst(before).first)
        #expect(activation.0 == ProfileParameters(userID: "ada", age: 36))
        #expect(activation.1.idempotencyKey == "create-1")
        #expect(activation.1.remoteAddress == "127.0.0.1")
        #expect(activation.1.isRestoration)
        #expect(calls.all.filter { $0.0.userID == "ada" }.map(\.1.isRestoration) == [false, true])
        // What is stored is what the creating request said, nothing of this activation.
        let stored = try #require(try store.load(id: id)?.creation)
        #expect(!String(decoding: stored, as: UTF8.self).contains("isRestoration"))
    }

    @Test func aCheckAddedLaterRefusesNewSessionsAndSparesStoredOnes() async throws {
        let store = InMemorySessionStore(historyCapacity: 16)
        let first = inProcessServer(registry: Self.registry(recording: FactoryCalls())) { $0.store = store }
        try first.start()
        let created = try await HTTPClient(base: "http://127.0.0.1:\(first.port)").post(
            "/reactors", #"{"type":"profile","parameters":{"userID":"ada","age":36}}"#)
        let id = try #require(created.json["id"] as? String)
        first.shutdown()

        // The next build takes no one over 30, except the sessions made before it did.
        struct TooOld: Error, CustomStringConvertible { var description: String { "age must be at most 30" } }
        for sparesStoredSessions in [false, true] {
            var registry = ReactorRegistry()
            registry.register("profile") { (parameters: ProfileParameters, context) in
                guard (parameters.age ?? 0) <= 30 || (sparesStoredSessions && context.isRestoration) else { throw TooOld() }
                return ProfileReactor(userID: parameters.userID)
            }
            let stricter = inProcessServer(registry: registry) { $0.store = store }
            try stricter.start()
            defer { stricter.shutdown() }
            let client = HTTPClient(base: "http://127.0.0.1:\(stricter.port)")
            let greeted = try await client.post("/reactors/\(id)/actions?wait=true", #""greet""#)
            #expect(greeted.status == (sparesStoredSessions ? 200 : 500))
            let refused = try await client.post("/reactors", #"{"type":"profile","parameters":{"userID":"bo","age":31}}"#)
            #expect(refused.status == 422)
            #expect(refused.text.contains("age must be at most 30"))
        }
    }

    @Test func badOrMissingParametersAre422NamingTheFieldAndCreateNothing() async throws {
        let calls = FactoryCalls()
        let store = InMemorySessionStore(historyCapacity: 16)
        let server = inProcessServer(registry: Self.registry(recording: calls)) { $0.store = store }
        let registered = calls.all.count
        try server.start()
        defer { server.shutdown() }
        let client = HTTPClient(base: "http://127.0.0.1:\(server.port)")
        let cases: [(body: String, mentions: String)] = [
            (#"{"type":"profile"}"#, "userID"),
            (#"{"type":"profile","parameters":{}}"#, "userID"),
            (#"{"type":"profile","parameters":{"userID":7}}"#, "userID"),
            (#"{"type":"profile","parameters":{"userID":"ada","age":"old"}}"#, "age"),
            (#"{"type":"profile","parameters":[1]}"#, "top level"),
            (#"{"type":"profile","parameters":{"userID":""}}"#, "userID must not be empty"),
            (#"{"type":"plain","parameters":{"userID":"ada"}}"#, "takes no parameters"),
        ]
        for (body, mentions) in cases {
            let reply = try await client.post("/reactors", body)
            #expect(reply.status == 422, "\(body): \(reply.status) \(reply.text)")
            #expect(reply.header("Content-Type") == "application/problem+json")
            #expect(reply.json["type"] as? String == "urn:reactor-server:problem:invalid-parameters")
            #expect((reply.json["detail"] as? String)?.contains(mentions) == true, "\(body): \(reply.text)")
        }
        let misspelt = try await client.post("/reactors", #"{"type":"profile","parameterz":{"userID":"ada"}}"#)
        #expect(misspelt.status == 400)
        #expect(misspelt.text.contains("parameterz"))
        #expect(server.service.instanceCount == 0)
        #expect(try store.count() == 0)
        #expect(calls.all.count == registered)
        // A type without parameters takes an explicit null, as no parameters.
        #expect(try await client.post("/reactors", #"{"type":"plain","parameters":null}"#).status == 201)
    }

    @Test func typesShowWhichTakeParametersWithTheirExample() async throws {
        let server = inProcessServer(registry: Self.registry(recording: FactoryCalls()))
        try server.start()
        defer { server.shutdown() }
        let types = try await HTTPClient(base: "http://127.0.0.1:\(server.port)").get("/types")
        let list = types.json["types"] as? [[String: Any]] ?? []
        let profile = try #require(list.first { $0["name"] as? String == "profile" })
        #expect(profile["parameters"] as? String == "ProfileParameters")
        #expect((profile["exampleParameters"] as? [String: Any])?["userID"] as? String == "example")
        #expect((profile["initialState"] as? [String: Any])?["userID"] as? String == "example")
        let plain = try #require(list.first { $0["name"] as? String == "plain" })
        #expect(plain["parameters"] == nil)
    }
}
