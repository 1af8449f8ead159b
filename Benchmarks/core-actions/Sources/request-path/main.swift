import Logging
import MallocCounter
import MicroHTTP
import ReactorExamples
import ReactorHTTP
import ReactorHosting

// The service's own cost per request, without sockets or libmicrohttpd: the request as the
// server builds it → router → route → reactor → response (with metrics), on one thread.
// The baseline is a router whose only route answers a fixed body, like the C ceiling server.

// Usage: request-path [REQUESTS] [INSTANCES [SPREAD]]. With INSTANCES, POSTs spread over that
// many counters are measured too, against the same POSTs spread over 100 of them (the
// many-instances scenario of Benchmarks/run without sockets, threads or the load generator).
// With SPREAD, only POSTs spread over that many of the counters are measured: two runs under
// `valgrind --tool=cachegrind` that differ only in SPREAD count the cache misses that spreading
// adds (the difference of their totals, divided by REQUESTS).
let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let count = arguments.first ?? 300_000
let instances = arguments.dropFirst().first ?? 0
let onlySpread = arguments.dropFirst(2).first
let warmup = 10_000

var registry = ReactorRegistry()
registry.register("counter", exampleActions: CounterReactor.exampleActions) { CounterReactor(delay: .zero) }
var configuration = ReactorServiceConfiguration()
// The reactor's work runs on the measuring thread, as part of each request, rather than on the
// service's reactor threads, where this loop would not see its cost.
configuration.reactorThreads = 0
// With many instances, rings that stop growing after two actions, so that the spread rows count
// what every action touches rather than histories still growing into fresh memory.
if instances > 0 { configuration.historyCapacity = 8 }
configuration.maxInstances = max(configuration.maxInstances, instances + 1)
// Quiet: creating thousands of counters would otherwise log a line each.
var logger = Logger(label: "request-path")
logger.logLevel = .warning
let service = ReactorService(registry: registry, configuration: configuration, logger: logger)
let router = service.makeRouter()

/// Creates a counter and returns its id.
func createCounter() -> Substring {
    let created = router.handle(HTTPRequest(method: .POST, target: "/reactors", headers: ["Content-Type": "application/json"],
                                            body: Array(#"{"type":"counter"}"#.utf8)))
    let createdBody = created.body
    guard created.status == 201,
          let id = String(decoding: createdBody, as: UTF8.self).split(separator: "\"").dropFirst(3).first else {
        fatalError("could not create a counter: \(created.status)")
    }
    return id
}
let id = createCounter()

/// Headers as curl or wrk send them.
let postHeaders: HTTPHeaders = ["Host": "127.0.0.1:8080", "Content-Type": "application/json", "Content-Length": "10"]
let getHeaders: HTTPHeaders = ["Host": "127.0.0.1:8080"]
let action = Array(#""increase""#.utf8)

/// `POST "increase"` to `path`, as the server builds it.
func post(to path: String) -> HTTPRequest {
    HTTPRequest(method: .POST, path: path, query: [:], headers: postHeaders, body: action)
}
func post() -> HTTPRequest { post(to: "/reactors/\(id)/actions") }
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

var rows = onlySpread != nil ? [] : [
    measure("POST /reactors/{id}/actions \"increase\"", expect: 202, using: router, post),
    measure("GET /reactors/{id}", expect: 200, using: router, get),
    // Each GET reads a version nobody has read yet, so its state is encoded to JSON.
    measure("POST, then GET of the new version (timed as a pair)", expect: 200, using: router) {
        precondition(router.handle(post()).status == 202)
        return get()
    },
    measure("baseline: fixed body through the router", expect: 200, using: fixedRouter, post),
]

if instances > 0 {
    let paths = (0..<instances).map { _ in "/reactors/\(createCounter())/actions" }
    // Two actions each first, so every counter's ring and queue exist before measuring.
    for path in paths {
        for _ in 0..<2 { precondition(router.handle(post(to: path)).status == 202) }
    }
    /// POSTs visiting the first `spread` counters in a scattered order (a step of about 0.618 of
    /// them, coprime with their number), so that neighbouring instances are not hit in turn.
    func spreadPosts(over spread: Int) -> () -> HTTPRequest {
        var step = max(1, Int(Double(spread) * 0.618))
        while gcd(step, spread) != 1 { step += 1 }
        var index = 0
        return {
            index = (index + step) % spread
            return post(to: paths[index])
        }
    }
    if let onlySpread {
        let spread = min(max(1, onlySpread), instances)
        rows.append(measure("POST spread over \(spread) of the counters", expect: 202, using: router, spreadPosts(over: spread)))
    } else {
        rows.append(measure("POST spread over 100 of the counters", expect: 202, using: router, spreadPosts(over: min(100, instances))))
        rows.append(measure("POST spread over all \(instances) counters", expect: 202, using: router, spreadPosts(over: instances)))
    }
}

func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }

print("request-path: \(count) requests each, one thread (release build)")
for row in rows {
    let name = row.name + String(repeating: " ", count: max(0, 44 - row.name.count))
    let nanoseconds = String(Int(row.nanoseconds.rounded()))
    let allocations = (row.allocations * 100).rounded() / 100
    print("\(name) \(String(repeating: " ", count: max(0, 7 - nanoseconds.count)))\(nanoseconds) ns/request  \(allocations) allocations/request")
}
