import ArgumentParser
import Dispatch
import Foundation
import Logging
import MicroHTTP
import ReactorHTTP
import ReactorHosting
import ReactorStorePostgres
import ReactorStoreSQLite
import ServiceLifecycle
import Synchronization

/// `APP [serve]`: serves the app's reactors over HTTP. Every flag has an environment variable
/// of the same meaning; a flag given on the command line wins.
struct ServeCommand<App: ReactorServiceApp>: AsyncParsableCommand {
    static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "serve",
            abstract: "Serves the registered reactors (the default command).",
            discussion:
                "Every option can also be set through the environment variable named in its help; a variable set to a value its option would refuse is an error, even where the option is also given."
        )
    }

    @Option(help: "Address to listen on (HOST).")
    var host: String = ServiceEnvironment.string("HOST", default: "127.0.0.1")

    @Option(parsing: .unconditional, help: "Port to listen on; 0 picks a free one (PORT).")
    var port: UInt16 = ServiceEnvironment.value("PORT", default: 8080)

    @Option(
        parsing: .unconditional,
        help: "HTTP event loops, each a thread serving its share of the connections; 0 uses one per core (THREADS).")
    var threads: Int = ServiceEnvironment.value("THREADS", default: 0)

    @Option(
        parsing: .unconditional,
        help:
            "Threads applying actions (mutate, reduce) apart from the HTTP threads; default one per core; 0 applies them on the HTTP threads, no faster and unprotected from a mutate that never returns (REACTOR_THREADS)."
    )
    var reactorThreads: Int = ServiceEnvironment.value("REACTOR_THREADS", default: HTTPServerConfiguration.activeProcessorCount)

    @Option(
        parsing: .unconditional,
        help: "Milliseconds mutate, reduce or a transform may run before its instance counts as stalled (STALL_TIMEOUT_MS).")
    var stallTimeoutMs: Int = ServiceEnvironment.value("STALL_TIMEOUT_MS", default: 1000)

    @Option(parsing: .unconditional, help: "Most live reactor instances (MAX_INSTANCES).")
    var maxInstances: Int = ServiceEnvironment.value("MAX_INSTANCES", default: 100_000)

    @Option(parsing: .unconditional, help: "Most open event streams in the server (MAX_STREAMS).")
    var maxStreams: Int = ServiceEnvironment.value("MAX_STREAMS", default: 20_000)

    @Option(parsing: .unconditional, help: "Most open event streams on one instance (MAX_STREAMS_PER_INSTANCE).")
    var maxStreamsPerInstance: Int = ServiceEnvironment.value("MAX_STREAMS_PER_INSTANCE", default: 10_000)

    @Option(parsing: .unconditional, help: "Most open connections (MAX_CONNECTIONS).")
    var maxConnections: Int = ServiceEnvironment.value("MAX_CONNECTIONS", default: 30_000)

    @Option(parsing: .unconditional, help: "Largest request body, in bytes (MAX_BODY_BYTES).")
    var maxBodyBytes: Int = ServiceEnvironment.value("MAX_BODY_BYTES", default: 1 << 20)

    @Option(parsing: .unconditional, help: "Largest request header block, in bytes (MAX_HEADER_BYTES).")
    var maxHeaderBytes: Int = ServiceEnvironment.value("MAX_HEADER_BYTES", default: 8 * 1024)

    @Option(parsing: .unconditional, help: "Close connections idle for this many seconds; 0 never (CONNECTION_TIMEOUT_S).")
    var connectionTimeoutS: Int = ServiceEnvironment.value("CONNECTION_TIMEOUT_S", default: 60)

    @Option(parsing: .unconditional, help: "Dispose instances idle for this many seconds with no open stream (IDLE_TIMEOUT_S).")
    var idleTimeoutS: Int = ServiceEnvironment.value("IDLE_TIMEOUT_S", default: 1800)

    @Option(parsing: .unconditional, help: "States kept per instance for Last-Event-ID replay (HISTORY_SIZE).")
    var historySize: Int = ServiceEnvironment.value("HISTORY_SIZE", default: 256)

    @Option(parsing: .unconditional, help: "Longest ?wait=true holds a request, in milliseconds (WAIT_TIMEOUT_MS).")
    var waitTimeoutMs: Int = ServiceEnvironment.value("WAIT_TIMEOUT_MS", default: 10_000)

    @Option(
        parsing: .unconditional,
        help:
            "Seconds a stop (SIGTERM) lets actions still in flight finish once it has stopped serving; what runs longer is cut off and handed to the reactor's recovery hook on the next start (STOP_GRACE_S)."
    )
    var stopGraceS: Int = ServiceEnvironment.value("STOP_GRACE_S", default: 5)

    @Option(parsing: .unconditional, help: "Seconds between heartbeat comments on idle event streams (HEARTBEAT_S).")
    var heartbeatS: Int = ServiceEnvironment.value("HEARTBEAT_S", default: 15)

    @Option(help: "Comma-separated origins allowed by CORS, or * for any; empty disables CORS (CORS_ORIGINS).")
    var corsOrigins: String = ServiceEnvironment.string("CORS_ORIGINS", default: "")

    @Option(
        help:
            "Where sessions are kept: memory (lost on restart); sqlite:PATH, a SQLite file created when missing (sqlite:PATH?max_page_count=N caps its size in pages); or postgres://USER[:PASSWORD]@HOST[:PORT]/DB, a PostgreSQL database several nodes share (STORE)."
    )
    var store: String = ServiceEnvironment.string("STORE", default: "sqlite:reactor-data/sessions.sqlite")

    @Option(
        help:
            "sync: an action is acknowledged, and a state shown, only once committed; async: at once, committed within --flush-interval-ms, so a crash may lose that window (DURABILITY)."
    )
    var durability: String = ServiceEnvironment.string("DURABILITY", default: "sync")

    @Option(
        parsing: .unconditional,
        help: "With --durability async, the longest a write waits to be committed, in milliseconds (FLUSH_INTERVAL_MS).")
    var flushIntervalMs: Int = ServiceEnvironment.value("FLUSH_INTERVAL_MS", default: 10)

    @Option(
        parsing: .unconditional,
        help:
            "With a store, seconds an instance with no open stream and no action in flight stays in memory; its next request brings it back (PASSIVATE_AFTER_S)."
    )
    var passivateAfterS: Int = ServiceEnvironment.value("PASSIVATE_AFTER_S", default: 60)

    @Option(
        parsing: .unconditional,
        help:
            "With a postgres store, seconds a node's claim on a session lasts unless renewed; after a node dies its sessions move to the others within about that long (LEASE_S)."
    )
    var leaseS: Int = ServiceEnvironment.value("LEASE_S", default: 4)

    @Option(
        parsing: .unconditional,
        help:
            "With a postgres store, seconds a call may wait for the database before it fails: the request answers 503 and the connection is made again (STORE_TIMEOUT_S)."
    )
    var storeTimeoutS: Int = ServiceEnvironment.value(
        "STORE_TIMEOUT_S", default: Int(PostgresSessionStore.defaultTimeout.components.seconds))

    @Option(
        help:
            "With a postgres store, this node's name, unique among the nodes; a node restarted under the same name takes its sessions back at once. Default: the host name and port (NODE_ID)."
    )
    var nodeId: String = ServiceEnvironment.string("NODE_ID", default: "")

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (LOG_LEVEL).")
    var logLevel: String = ServiceEnvironment.string("LOG_LEVEL", default: "info")

    @Option(
        help:
            "Log format: text, one readable line per entry; or json, one JSON object per line with timestamp, level, label, source, message and metadata, for log collectors (LOG_FORMAT)."
    )
    var logFormat: String = ServiceEnvironment.string("LOG_FORMAT", default: "text")

    @Option(
        help:
            "Once listening, write the address (http://HOST:PORT) to this file, which the `health` command reads; removed on a graceful stop (ADDRESS_FILE)."
    )
    var addressFile: String = ServiceEnvironment.string("ADDRESS_FILE", default: "")

    @Option(
        help:
            "Where the spans of each action go: none; or otlp, to an OpenTelemetry collector over OTLP/HTTP as the OTEL_EXPORTER_OTLP_* variables say (default http://localhost:4318), in a build with the OTLP trait (TRACES)."
    )
    var traces: String = ServiceEnvironment.string("TRACES", default: "none")

    /// Who may use the service.
    @OptionGroup(title: "Owners and authentication")
    var authentication: AuthenticationOptions

    /// The app's own options.
    @OptionGroup(title: "Options of this service")
    var appOptions: App.Options

    func validate() throws {
        if let problem = ServiceEnvironment.firstProblem { throw ValidationError(problem) }
        guard ["none", "otlp"].contains(traces.lowercased()) else {
            throw ValidationError("\(ServiceEnvironment.setting("traces")) must be none or otlp, not '\(traces)'")
        }
        if traces.lowercased() == "otlp" && !TraceExport.isAvailable {
            throw ValidationError(
                "\(ServiceEnvironment.setting("traces")) otlp needs a build with the OTLP trait: swift build -c release --traits OTLP")
        }
        guard ["sync", "async"].contains(durability.lowercased()) else {
            throw ValidationError("\(ServiceEnvironment.setting("durability")) must be sync or async, not '\(durability)'")
        }
        do {
            _ = try StoreLocation(store)
        } catch let error as ValidationError {
            throw ValidationError("\(error.message) (\(ServiceEnvironment.setting("store")))")
        }
        guard Logger.Level(rawValue: logLevel.lowercased()) != nil else {
            throw ValidationError(
                "\(ServiceEnvironment.setting("log-level")) must be trace, debug, info, notice, warning, error or critical, not '\(logLevel)'"
            )
        }
        guard ["text", "json"].contains(logFormat.lowercased()) else {
            throw ValidationError("\(ServiceEnvironment.setting("log-format")) must be text or json, not '\(logFormat)'")
        }
        for (name, value) in [
            ("max-instances", maxInstances), ("max-streams", maxStreams),
            ("max-streams-per-instance", maxStreamsPerInstance),
            ("max-connections", maxConnections), ("max-body-bytes", maxBodyBytes),
            ("max-header-bytes", maxHeaderBytes), ("heartbeat-s", heartbeatS),
            ("idle-timeout-s", idleTimeoutS), ("wait-timeout-ms", waitTimeoutMs),
            ("stall-timeout-ms", stallTimeoutMs), ("flush-interval-ms", flushIntervalMs),
            ("passivate-after-s", passivateAfterS), ("lease-s", leaseS),
            ("store-timeout-s", storeTimeoutS),
        ]
        where value <= 0 {
            throw ValidationError("\(ServiceEnvironment.setting(name)) must be positive, not \(value)")
        }
        for (name, value) in [
            ("threads", threads), ("reactor-threads", reactorThreads),
            ("history-size", historySize),
            ("connection-timeout-s", connectionTimeoutS), ("stop-grace-s", stopGraceS),
        ]
        where value < 0 {
            throw ValidationError("\(ServiceEnvironment.setting(name)) must not be negative, not \(value)")
        }
    }

    /// This node's name among those sharing a postgres store.
    var nodeName: String {
        nodeId.isEmpty ? "\(ProcessInfo.processInfo.hostName):\(port)" : nodeId
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel.lowercased()) ?? .info
        let json = logFormat.lowercased() == "json"
        LoggingSystem.bootstrap { label in
            if json {
                var handler = JSONLogHandler(label: label)
                handler.logLevel = level
                return handler
            }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: App.commandName)
        // Before any reactor exists: what the reactors record through swift-metrics reaches /metrics.
        ReactorServer.bootstrapMetrics()
        // Before the service exists too: it picks up the tracer the process bootstrapped.
        let traceExporter =
            traces.lowercased() == "otlp" ? try TraceExport.bootstrapOTLP(serviceName: App.commandName, logger: logger) : nil

        var service = ReactorServiceConfiguration()
        service.maxInstances = maxInstances
        service.maxStreams = maxStreams
        service.maxStreamsPerInstance = maxStreamsPerInstance
        service.historyCapacity = historySize
        service.idleTimeout = .seconds(idleTimeoutS)
        service.waitTimeout = .milliseconds(waitTimeoutMs)
        service.heartbeatInterval = .seconds(heartbeatS)
        service.reactorThreads = reactorThreads
        service.stallTimeout = .milliseconds(stallTimeoutMs)
        service.durability = durability.lowercased() == "async" ? .async(flushInterval: .milliseconds(flushIntervalMs)) : .sync
        service.passivateAfter = .seconds(passivateAfterS)
        service.stopGrace = .seconds(stopGraceS)
        // `validate` has checked it, so this does not throw.
        let location = try StoreLocation(store)
        do {
            service.store = try location.open(
                historyCapacity: historySize, node: nodeName, lease: .seconds(leaseS),
                timeout: .seconds(storeTimeoutS))
        } catch {
            throw Self.startFailed("could not open the session store", error, logger: logger, json: json)
        }
        if let sqlite = service.store as? SQLiteSessionStore, sqlite.isReadableByOthers {
            logger.warning(
                "the session store is readable by other users; its ids are the sessions' credentials: chmod 600 it (and its -wal and -shm files)",
                metadata: ["path": "\(sqlite.path)"])
        }
        if case .postgres = location {
            // Long enough for a dead owner's lease to lapse: clients see a pause, not a 503.
            service.ownershipWait = .seconds(leaseS + 2)
        }
        switch location {
        case .sqlite(let path, _):
            logger.info("sessions kept in \(path)", metadata: ["durability": "\(durability.lowercased())"])
        case .postgres(let database):
            logger.info(
                "sessions kept in \(database), shared with the other nodes",
                metadata: ["durability": "\(durability.lowercased())", "node": "\(nodeName)", "lease": "\(leaseS)s"])
        case .memory:
            logger.notice("sessions kept in memory only: a restart loses them")
        }
        service.allowedOrigins = corsOrigins.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }

        var http = HTTPServerConfiguration()
        http.host = host
        http.port = port
        if threads > 0 { http.threads = threads }
        http.connectionLimit = maxConnections
        http.maxBodySize = maxBodyBytes
        http.maxHeaderSize = maxHeaderBytes
        http.connectionTimeout = connectionTimeoutS > 0 ? .seconds(connectionTimeoutS) : nil

        // With a database the nodes share, the reactors' cluster channels reach every node through it.
        var registry = ReactorRegistry()
        if case .postgres(let database) = location {
            registry = ReactorRegistry { name in PostgresChannel(location: database, name: name, logger: logger) }
        }
        let app = App()
        try await Self.register(app, in: &registry, options: appOptions, logger: logger, json: json)
        var keyFiles: JWTKeyFiles?
        do {
            (service.authentication, keyFiles) = try await authentication.configure(
                appAuthenticator: app.authenticator(options: appOptions), logger: logger)
        } catch {
            throw Self.startFailed("could not set up authentication", error, logger: logger, json: json)
        }
        if service.authentication != nil, authentication.maxInstancesPerSubject > 0 {
            service.maxInstancesPerSubject = authentication.maxInstancesPerSubject
        }
        let server = ReactorServer(registry: registry, configuration: service, http: http, logger: logger)
        let (host, addressFile) = (self.host, self.addressFile)
        let announced = AnnouncedServer(server: server) { port in
            let address = ListenAddress(host: host, port: port)
            if !addressFile.isEmpty { try AddressFile.write(address.url, to: addressFile) }
            // The line a supervisor or test reads to learn the bound port.
            FileHandle.standardOutput.write(Data("\(App.commandName) listening on \(address.url)\n".utf8))
        }
        // SIGTERM and SIGINT stop the server gracefully: the group traps them before it starts
        // the server, so a signal sent once the port is announced already stops it gracefully.
        // The exporter runs first and stops last (a group stops in reverse order), so the spans
        // of the server's last requests are sent.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let exporter = traceExporter { services.append(.init(service: exporter)) }
        if let keyFiles { services.append(.init(service: keyFiles)) }
        services.append(.init(service: announced))
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: services, gracefulShutdownSignals: [.sigterm, .sigint],
                cancellationSignals: [], logger: logger))
        let signals = StopSignals.install([SIGTERM, SIGINT], group: group, logger: logger)
        do {
            try await group.run()
        } catch {
            logger.critical("could not start: \(error)")
            throw ExitCode(1)
        }
        withExtendedLifetime(signals) {}
        if !addressFile.isEmpty { unlink(addressFile) }
        // Returning from `run` exits 0.
    }

    /// Has `app` register its reactor types in `registry`; a registration that throws ends
    /// `serve` as a failed start (``startFailed(_:_:logger:json:)``).
    static func register(
        _ app: App, in registry: inout ReactorRegistry, options: App.Options, logger: Logger, json: Bool
    ) async throws(ExitCode) {
        do {
            try await app.register(&registry, options: options)
        } catch {
            throw startFailed("could not register the reactor types", error, logger: logger, json: json)
        }
    }

    /// Logs why `serve` could not start (`what: error`) and gives the exit code to end with: 1.
    /// Also as a plain line on standard error unless logs are JSON, for a person reading a
    /// terminal; a log collector reading JSON gets the log entry only.
    static func startFailed(_ what: String, _ error: any Error, logger: Logger, json: Bool) -> ExitCode {
        logger.critical("\(what): \(error)")
        if !json { FileHandle.standardError.write(Data("\(App.commandName): \(what): \(error)\n".utf8)) }
        return ExitCode(1)
    }
}
