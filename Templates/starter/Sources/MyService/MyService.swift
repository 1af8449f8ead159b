import MyReactors
import ReactorServerKit

/// The service: `my-service --help` lists everything it can do.
@main
struct MyService: ReactorServiceApp {
    func register(_ reactors: inout ReactorRegistry, options: NoOptions) {
        reactors.register(
            "counter", summary: "A counter; create it with a step", exampleActions: [.increase, .decrease],
            exampleParameters: CounterReactor.Parameters(step: 1)
        ) { (parameters: CounterReactor.Parameters, _) in
            CounterReactor(step: parameters.step ?? 1)
        }
    }
}
