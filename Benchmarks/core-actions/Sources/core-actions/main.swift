import MallocCounter
import ReactorCore
import ReactorExamples

/// One measured run: how long `count` operations took and how many allocations they made.
struct Measurement {
    let name: String
    let count: Int
    let seconds: Double
    let allocations: UInt64

    var perSecond: Double { Double(count) / seconds }
    var nanosecondsEach: Double { seconds * 1e9 / Double(count) }
    var allocationsEach: Double { Double(allocations) / Double(count) }

    func line() -> String {
        "\(pad(name, 44)) \(pad(format(perSecond, 0), 12)) actions/s  \(pad(format(nanosecondsEach, 1), 7)) ns/action  \(format(allocationsEach, 3)) allocations/action"
    }
}

func measure(_ name: String, count: Int, _ body: () -> Void) -> Measurement {
    let clock = ContinuousClock()
    let allocationsBefore = malloc_counter_allocations()
    let elapsed = clock.measure(body)
    let allocations = malloc_counter_allocations() - allocationsBefore
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return Measurement(name: name, count: count, seconds: seconds, allocations: allocations)
}

func format(_ value: Double, _ decimals: Int) -> String {
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    if decimals == 0 { return String(Int(rounded)) }
    let whole = Int(rounded)
    let fraction = Int(((rounded - Double(whole)) * scale).rounded())
    let digits = String(fraction)
    return "\(whole).\(String(repeating: "0", count: decimals - digits.count))\(digits)"
}

func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

let count = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 1_000_000
let warmup = 10_000

// The runtime: every action goes through send → mutate → 4 × (reduce → publish).
let reactor = CounterReactor(delay: .zero)
for _ in 0..<warmup { reactor.send(.increase) }
let runtime = measure("send(.increase), delay 0, no subscriber", count: count) {
    for _ in 0..<count { reactor.send(.increase) }
}
precondition(reactor.currentState.value == warmup + count, "every action must be applied")

// The same through code generic over `Reactor` (how the HTTP layer calls it): the call goes
// through the protocol witness, which is specialised for CounterReactor.
@inline(never)
func sendGenerically<R: Reactor>(_ action: R.Action, to reactor: R, times: Int) {
    for _ in 0..<times { reactor.send(action) }
}
let generic = CounterReactor(delay: .zero)
sendGenerically(.increase, to: generic, times: warmup)
let throughGenericCode = measure("same, called from generic code", count: count) {
    sendGenerically(.increase, to: generic, times: count)
}
precondition(generic.currentState.value == warmup + count)

// The same with one synchronous observer (what the HTTP layer registers per instance).
let observed = CounterReactor(delay: .zero)
let versions = Box(0)
let token = observed.observe { update in versions.value = Int(update.version) }
for _ in 0..<warmup { observed.send(.increase) }
let withObserver = measure("send(.increase), delay 0, one observer", count: count) {
    for _ in 0..<count { observed.send(.increase) }
}
precondition(versions.value == 4 * (warmup + count))
token.cancel()

// The baseline: the same four reduces per action in a plain loop, no runtime.
let plain = CounterReactor(delay: .zero)
let mutations: [CounterReactor.Mutation] = [.setLoading(true), .increaseValue, .setLoading(false), .setAlertMessage("increased!")]
var state = plain.initialState
let baseline = measure("baseline: 4 × reduce in a loop", count: count) {
    for _ in 0..<count {
        for mutation in mutations { state = plain.reduce(state: state, mutation: mutation) }
    }
}
precondition(state.value == count)

print("core-actions: \(count) actions to one CounterReactor (release build)")
for measurement in [runtime, throughGenericCode, withObserver, baseline] { print(measurement.line()) }
print("runtime / baseline time per action: \(format(runtime.nanosecondsEach / baseline.nanosecondsEach, 2))×")

/// A counter the observer writes from the sending thread (the benchmark is single-threaded).
final class Box: @unchecked Sendable {
    // Only touched by the benchmark's one thread: the observer runs on the thread that sends.
    var value: Int
    init(_ value: Int) { self.value = value }
}
