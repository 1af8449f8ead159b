import ReactorExamples
import ReactorServerKit

/// `reactor-server`: the example reactors (counter, todo, search, room) served by the same
/// library a team's own service uses.
@main
struct ReactorServerApp: ReactorServiceApp {
    static let commandName = "reactor-server"

    /// The examples' own options.
    struct Options: ParsableArguments {
        @Option(parsing: .unconditional, help: "Delay of the counter example's value change, in milliseconds (COUNTER_DELAY_MS).")
        var counterDelayMs: Int = ServiceEnvironment.value("COUNTER_DELAY_MS", default: 500)

        @Option(parsing: .unconditional, help: "Latency of the search example's look-ups, in milliseconds (SEARCH_LATENCY_MS).")
        var searchLatencyMs: Int = ServiceEnvironment.value("SEARCH_LATENCY_MS", default: 300)

        func validate() throws {
            for (name, value) in [("counter-delay-ms", counterDelayMs), ("search-latency-ms", searchLatencyMs)] where value < 0 {
                throw ValidationError("\(ServiceEnvironment.setting(name)) must not be negative, not \(value)")
            }
        }
    }

    func register(_ reactors: inout ReactorRegistry, options: Options) {
        // The room's messages reach every node through the store several nodes share.
        let room = Room(channel: reactors.clusterChannel(named: "reactor_room"))
        ExampleReactors.register(
            in: &reactors, counterDelay: .milliseconds(options.counterDelayMs),
            searchLatency: .milliseconds(options.searchLatencyMs), room: room)
    }
}
