import Logging
import MicroHTTP
import ReactorExamples
import ReactorHTTP
import ReactorHosting

/// A `ReactorServer` in the test's own process serving the counter (no delay) on an ephemeral
/// port of 127.0.0.1, with one HTTP thread, one reactor thread, a `?wait=true` budget of 60 s and
/// passivation after an hour; `configure` adjusts the service's configuration. Not started.
func inProcessCounterServer(configure: (inout ReactorServiceConfiguration) -> Void = { _ in }) -> ReactorServer {
    var registry = ReactorRegistry()
    registry.register("counter", exampleActions: CounterReactor.exampleActions) { CounterReactor(delay: .zero) }
    return inProcessServer(registry: registry, configure: configure)
}

/// A `ReactorServer` in the test's own process serving `registry`, as ``inProcessCounterServer(configure:)``;
/// `configureHTTP` adjusts the HTTP server's configuration.
func inProcessServer(
    registry: ReactorRegistry, configure: (inout ReactorServiceConfiguration) -> Void = { _ in },
    http configureHTTP: (inout HTTPServerConfiguration) -> Void = { _ in }
) -> ReactorServer {
    var http = HTTPServerConfiguration()
    http.port = 0
    http.threads = 1
    configureHTTP(&http)
    var configuration = ReactorServiceConfiguration()
    configuration.reactorThreads = 1
    // `?wait=true` answers 202 once this runs out: a test that waits for an action must not
    // depend on how long a loaded machine (sanitizers, every suite at once) takes to get there.
    configuration.waitTimeout = .seconds(60)
    // Nor must an instance leave memory while its test runs (with a store, 60 s idle by default),
    // where a test counts instances in memory.
    configuration.passivateAfter = .seconds(3600)
    configure(&configuration)
    return ReactorServer(registry: registry, configuration: configuration, http: http, logger: Logger(label: "test"))
}
