import Foundation
import SortedJSON

// Time to encode a state: the service's SortedJSONEncoder against Foundation's JSONEncoder with
// the options the service used before (sorted keys, slashes unescaped), side by side in one
// process, rounds alternated. Built by ./run against the SortedJSON target.

/// The counter example's state, as it encodes (a Pulse is `{"count":…,"value":…}`).
struct CounterState: Encodable {
    struct Pulse: Encodable {
        var value: String?
        var count: UInt64
        enum CodingKeys: String, CodingKey { case value, count }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(value, forKey: .value)
            try container.encode(count, forKey: .count)
        }
    }
    var value: Int
    var isLoading: Bool
    var alertMessage: Pulse
}

/// The to-do example's state with ten tasks.
struct TodoState: Encodable {
    struct Task: Encodable { let id: String; var title: String; var isDone: Bool }
    var tasks: [Task]
}

let foundation: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return encoder
}()

/// Nanoseconds per call of `body`, over `count` calls after a tenth as many to warm up.
func nanoseconds(_ count: Int, _ body: () throws -> Int) rethrows -> Double {
    var sink = 0
    for _ in 0..<count / 10 { sink &+= try body() }
    let elapsed = try ContinuousClock().measure { for _ in 0..<count { sink &+= try body() } }
    precondition(sink != 0)
    return (Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9) / Double(count)
}

var counter = CounterState(value: 41, isLoading: true, alertMessage: .init(value: "increased!", count: 3))
let todo = TodoState(tasks: (0..<10).map { .init(id: "t\($0)", title: "task number \($0)", isDone: $0 % 2 == 0) })
/// Both encoders must write the same bytes for the comparison to mean anything.
func checkSameBytes(_ value: some Encodable) throws {
    let expected = try foundation.encode(value)
    let ours = Data(try SortedJSONEncoder.encode(value))
    precondition(expected == ours, "different bytes: \(String(decoding: ours, as: UTF8.self))")
}
try checkSameBytes(counter)
try checkSameBytes(todo)

let rounds = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 5
print("state-encoding: ns per encoded state, \(rounds) rounds (which encoder runs first alternates)")
print("round  counter: Foundation  ours   ratio   todo (10 tasks): Foundation  ours   ratio")
var ratios: ([Double], [Double]) = ([], [])
for round in 1...rounds {
    func measureCounter(_ ours: Bool) throws -> Double {
        try nanoseconds(200_000) {
            counter.value &+= 1
            return ours ? try SortedJSONEncoder.encode(counter).count : try foundation.encode(counter).count
        }
    }
    func measureTodo(_ ours: Bool) throws -> Double {
        try nanoseconds(20_000) { ours ? try SortedJSONEncoder.encode(todo).count : try foundation.encode(todo).count }
    }
    let oursFirst = round % 2 == 0
    var counterTimes = (foundation: 0.0, ours: 0.0), todoTimes = (foundation: 0.0, ours: 0.0)
    if oursFirst { counterTimes.ours = try measureCounter(true) }
    counterTimes.foundation = try measureCounter(false)
    if !oursFirst { counterTimes.ours = try measureCounter(true) }
    if oursFirst { todoTimes.ours = try measureTodo(true) }
    todoTimes.foundation = try measureTodo(false)
    if !oursFirst { todoTimes.ours = try measureTodo(true) }
    ratios.0.append(counterTimes.ours / counterTimes.foundation)
    ratios.1.append(todoTimes.ours / todoTimes.foundation)
    print(String(format: "%5d  %19.0f  %5.0f  %5.2f×  %27.0f  %5.0f  %5.2f×", round,
                 counterTimes.foundation, counterTimes.ours, ratios.0.last!,
                 todoTimes.foundation, todoTimes.ours, ratios.1.last!))
}
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}
print(String(format: "median ratio (ours ÷ Foundation): counter %.2f×, todo %.2f×", median(ratios.0), median(ratios.1)))
