import MallocCounter
import MicroHTTP
import ReactorExamples
import ReactorHTTP

// The service's own cost per request, without sockets or libmicrohttpd: the request as the
// server builds it → router → route → reactor → response (with metrics), on one thread.
// The baseline is a router whose only route answers a fixed body, like the C ceiling server.

let count = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 300_000
let warmup = 10_000

var registry = ReactorRegistry()
registry.register("counter", exampleActions: CounterReactor.exampleActions) { CounterReactor(delay: .zero) }
var configuration = ReactorServiceConfiguration()
// The reactor's work runs on the measuring thread, as part of each request, rather than on the
// service's reactor threads, where this loop would not see its cost.
configuration.reactorThreads = 0
let service = ReactorService(registry: registry, configuration: configuration)
let router = service.makeRouter()

let created = router.handle(HTTPRequest(method: .POST, target: "/reactors", headers: ["Content-Type": "application/json"],
                                        body: Array(#"{"type":"counter"}"#.utf8)))
let createdBody = created.body
guard created.status == 201,
      let id = String(decoding: createdBody, as: UTF8.self).split(separator: "\"").dropFirst(3).first else {
    fatalError("could not create a counter: \(created.status)")
}

/// Headers as curl or wrk send them.
let postHeaders: HTTPHeaders = ["Host": "127.0.0.1:8080", "Content-Type": "application/json", "Content-Length": "10"]
let getHeaders: HTTPHeaders = ["Host": "127.0.0.1:8080"]
let action = Array(#""increase""#.utf8)

func post() -> HTTPRequest {
    HTTPRequest(method: .POST, path: "/reactors/\(id)/actions", query: [:], headers: postHeaders, body: action)
}
func get() -> HTTPRequest {
    HTTPRequest(method: .GET, path: "/reactors/\(id)", query: [:], headers: getHeaders, body: [])
}

var fixedRouter = Router()
let fixedBody = Array(#"{"value":1}"#.utf8)
fixedRouter.add(.POST, "/reactors/{id}/actions") { _ in
    HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: fixedBody)
}

/// One measured row: time and allocations per request.
struct Row {
    let name: String
    let nanoseconds: Double
    let allocations: Double
}

func measure(_ name: String, expect status: Int, using router: Router, _ makeRequest: () -> HTTPRequest) -> Row {
    for _ in 0..<warmup { precondition(router.handle(makeRequest()).status == status) }
    let clock = ContinuousClock()
    let before = malloc_counter_allocations()
    var statuses = 0
    let elapsed = clock.measure {
        for _ in 0..<count { statuses &+= router.handle(makeRequest()).status }
    }
    let allocations = malloc_counter_allocations() - before
    precondition(statuses == status * count, "every request must get \(status)")
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return Row(name: name, nanoseconds: seconds * 1e9 / Double(count), allocations: Double(allocations) / Double(count))
}

let rows = [
    measure("POST /reactors/{id}/actions \"increase\"", expect: 202, using: router, post),
    measure("GET /reactors/{id}", expect: 200, using: router, get),
    measure("baseline: fixed body through the router", expect: 200, using: fixedRouter, post),
]

print("request-path: \(count) requests each, one thread (release build)")
for row in rows {
    let name = row.name + String(repeating: " ", count: max(0, 44 - row.name.count))
    let nanoseconds = String(Int(row.nanoseconds.rounded()))
    let allocations = (row.allocations * 100).rounded() / 100
    print("\(name) \(String(repeating: " ", count: max(0, 7 - nanoseconds.count)))\(nanoseconds) ns/request  \(allocations) allocations/request")
}
