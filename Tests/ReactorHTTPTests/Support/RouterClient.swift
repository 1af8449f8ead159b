import Foundation
import Logging
import MicroHTTP
import ReactorExamples
import ReactorHosting

@testable import ReactorHTTP

/// Calls a service's router in-process, as HummingbirdTesting does: the same requests and
/// answers as over the wire, without sockets (deferred answers are awaited).
struct RouterClient: Sendable {
    let service: ReactorService
    private let router: Router

    /// A service with the example reactors (the counter's change after `counterDelay`) and
    /// `configuration` (by default, actions applied on the calling thread: no threads to leave
    /// running after the test).
    init(counterDelay: Duration = .zero, configuration: ReactorServiceConfiguration = RouterClient.defaultConfiguration) {
        var registry = ReactorRegistry()
        registry.register("counter", exampleActions: CounterReactor.exampleActions) { CounterReactor(delay: counterDelay) }
        registry.register("todo", exampleActions: TodoReactor.exampleActions) { TodoReactor() }
        registry.register("search", exampleActions: SearchReactor.exampleActions) { SearchReactor(latency: .zero) }
        registry.register("room", exampleActions: RoomReactor.exampleActions) { RoomReactor() }
        service = ReactorService(registry: registry, configuration: configuration, logger: Logger(label: "test"))
        router = service.makeRouter()
    }

    static var defaultConfiguration: ReactorServiceConfiguration {
        var configuration = ReactorServiceConfiguration()
        configuration.reactorThreads = 0
        // A `?wait=true` here waits for a settled action, not for its timeout: while the tests
        // run side by side on two cores, the concurrency pool can be held up for seconds
        // (Foundation's URLSession blocks its threads in `DispatchQueue.sync`).
        configuration.waitTimeout = .seconds(60)
        return configuration
    }

    func send(_ method: String, _ path: String, body: String? = nil, headers: [String: String] = [:]) async -> Reply {
        var fields = HTTPHeaders()
        if body != nil && headers["Content-Type"] == nil { fields["Content-Type"] = "application/json" }
        for (name, value) in headers { fields[name] = value }
        let request = HTTPRequest(
            method: HTTPMethod(rawValue: method), target: path, headers: fields,
            body: Array((body ?? "").utf8))
        let response = await router.handle(request).resolved()
        var replyHeaders: [String: String] = [:]
        for (name, value) in response.headers { replyHeaders[name] = value }
        return Reply(status: response.status, headers: replyHeaders, body: Data(response.body))
    }

    func get(_ path: String, headers: [String: String] = [:]) async -> Reply {
        await send("GET", path, headers: headers)
    }

    func post(_ path: String, _ body: String, headers: [String: String] = [:]) async -> Reply {
        await send("POST", path, body: body, headers: headers)
    }

    /// Creates an instance and returns its id.
    func create(_ type: String) async throws -> String {
        let reply = await post("/reactors", #"{"type":"\#(type)"}"#)
        guard reply.status == 201, let id = reply.json["id"] as? String else {
            throw TestFailure("create \(type): \(reply.status) \(reply.text)")
        }
        return id
    }
}
