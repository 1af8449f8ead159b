import Logging
import ServiceLifecycle

#if OTLP
    import OTel
#endif

/// Where `reactor-server` sends the spans of its actions (`--traces`): nowhere, or to an
/// OpenTelemetry collector over OTLP/HTTP through swift-otel, in a build with the `OTLP` trait
/// (`swift build -c release --traits OTLP`).
enum TraceExport {
    /// Whether this build can export over OTLP.
    static var isAvailable: Bool {
        #if OTLP
            true
        #else
            false
        #endif
    }

    /// Bootstraps the process's tracer to export over OTLP/HTTP, configured by the standard
    /// `OTEL_EXPORTER_OTLP_*` environment variables (endpoint, headers, timeout; by default
    /// http://localhost:4318), and returns the service that batches and sends the spans. Logs
    /// and metrics stay where they are (the log handler, `/metrics`).
    static func bootstrapOTLP(serviceName: String, logger: Logger) throws -> any Service {
        #if OTLP
            var configuration = OTel.Configuration.default
            configuration.serviceName = serviceName
            configuration.logs.enabled = false
            configuration.metrics.enabled = false
            configuration.traces.enabled = true
            configuration.traces.otlpExporter.protocol = .httpProtobuf
            configuration.diagnosticLogger = .custom(logger)
            return try OTel.bootstrap(configuration: configuration)
        #else
            preconditionFailure("validate() refuses --traces otlp in a build without the OTLP trait")
        #endif
    }
}
