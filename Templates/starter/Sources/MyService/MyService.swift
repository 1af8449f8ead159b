import MyReactors
import ReactorServerKit

/// The service: `my-service --help` lists everything it can do.
@main
struct MyService: ReactorServiceApp {
    func register(_ reactors: inout ReactorRegistry, options: NoOptions) {
        reactors.register(
            "counter", summary: "A counter; create it with a step from 1 to 1000000", exampleActions: [.increase, .decrease],
            exampleParameters: CounterReactor.Parameters(step: 1)
        ) { (parameters: CounterReactor.Parameters, _) in
            // Parameters come from clients: check them here, where a refusal answers 422 and
            // creates nothing. Unchecked, a step of Int.max would make `reduce` overflow, a trap
            // that stops the whole server, and again whenever the session is brought back.
            let step = parameters.step ?? 1
            guard CounterReactor.steps.contains(step) else { throw StepOutOfRange(step: step) }
            return CounterReactor(step: step)
        }
    }
}

/// Why a counter was not created: its step.
struct StepOutOfRange: Error, CustomStringConvertible {
    let step: Int
    var description: String {
        "'step' must be from \(CounterReactor.steps.lowerBound) to \(CounterReactor.steps.upperBound), not \(step)"
    }
}
