import ArgumentParser
import Dispatch
import Foundation
import Logging
import MicroHTTP
import ReactorExamples
import ReactorHTTP
import ReactorHosting
import ReactorStorePostgres
import ReactorStoreSQLite
import ServiceLifecycle
import Synchronization

/// `reactor-server`: `serve` (the default: `reactor-server --port 8080` serves), or a command on the store or the server.
@main
struct ReactorServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reactor-server",
        abstract: "Serves ReactorKit-style reactors over HTTP/JSON with server-sent events.",
        version: "reactor-server \(BuildInfo.version) (commit \(BuildInfo.commit))",
        subcommands: [ServerCommand.self, HealthCommand.self, BackupCommand.self, RestoreCommand.self, CheckCommand.self,
                      CompactCommand.self, CopyCommand.self],
        defaultSubcommand: ServerCommand.self
    )
}

/// `reactor-server [serve]`: serves the example reactors over HTTP. Every flag has an
/// environment variable of the same meaning; a flag given on the command line wins.
struct ServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serves the example reactors (the default command).",
        discussion: "Every option can also be set through the environment variable named in its help; a variable set to a value its option would refuse is an error, even where the option is also given."
    )

    @Option(help: "Address to listen on (HOST).")
    var host: String = Environment.string("HOST", default: "127.0.0.1")

    @Option(parsing: .unconditional, help: "Port to listen on; 0 picks a free one (PORT).")
    var port: UInt16 = Environment.value("PORT", default: 8080)

    @Option(parsing: .unconditional, help: "Delay of the counter example's value change, in milliseconds (COUNTER_DELAY_MS).")
    var counterDelayMs: Int = Environment.value("COUNTER_DELAY_MS", default: 500)

    @Option(parsing: .unconditional, help: "Latency of the search example's look-ups, in milliseconds (SEARCH_LATENCY_MS).")
    var searchLatencyMs: Int = Environment.value("SEARCH_LATENCY_MS", default: 300)

    @Option(parsing: .unconditional, help: "HTTP event loops, each a thread serving its share of the connections; 0 uses one per core (THREADS).")
    var threads: Int = Environment.value("THREADS", default: 0)

    @Option(parsing: .unconditional, help: "Threads applying actions (mutate, reduce) apart from the HTTP threads; default one per core; 0 applies them on the HTTP threads, no faster and unprotected from a mutate that never returns (REACTOR_THREADS).")
    var reactorThreads: Int = Environment.value("REACTOR_THREADS", default: HTTPServerConfiguration.activeProcessorCount)

    @Option(parsing: .unconditional, help: "Milliseconds mutate, reduce or a transform may run before its instance counts as stalled (STALL_TIMEOUT_MS).")
    var stallTimeoutMs: Int = Environment.value("STALL_TIMEOUT_MS", default: 1000)

    @Option(parsing: .unconditional, help: "Most live reactor instances (MAX_INSTANCES).")
    var maxInstances: Int = Environment.value("MAX_INSTANCES", default: 100_000)

    @Option(parsing: .unconditional, help: "Most open event streams in the server (MAX_STREAMS).")
    var maxStreams: Int = Environment.value("MAX_STREAMS", default: 20_000)

    @Option(parsing: .unconditional, help: "Most open event streams on one instance (MAX_STREAMS_PER_INSTANCE).")
    var maxStreamsPerInstance: Int = Environment.value("MAX_STREAMS_PER_INSTANCE", default: 10_000)

    @Option(parsing: .unconditional, help: "Most open connections (MAX_CONNECTIONS).")
    var maxConnections: Int = Environment.value("MAX_CONNECTIONS", default: 30_000)

    @Option(parsing: .unconditional, help: "Largest request body, in bytes (MAX_BODY_BYTES).")
    var maxBodyBytes: Int = Environment.value("MAX_BODY_BYTES", default: 1 << 20)

    @Option(parsing: .unconditional, help: "Largest request header block, in bytes (MAX_HEADER_BYTES).")
    var maxHeaderBytes: Int = Environment.value("MAX_HEADER_BYTES", default: 8 * 1024)

    @Option(parsing: .unconditional, help: "Close connections idle for this many seconds; 0 never (CONNECTION_TIMEOUT_S).")
    var connectionTimeoutS: Int = Environment.value("CONNECTION_TIMEOUT_S", default: 60)

    @Option(parsing: .unconditional, help: "Dispose instances idle for this many seconds with no open stream (IDLE_TIMEOUT_S).")
    var idleTimeoutS: Int = Environment.value("IDLE_TIMEOUT_S", default: 1800)

    @Option(parsing: .unconditional, help: "States kept per instance for Last-Event-ID replay (HISTORY_SIZE).")
    var historySize: Int = Environment.value("HISTORY_SIZE", default: 256)

    @Option(parsing: .unconditional, help: "Longest ?wait=true holds a request, in milliseconds (WAIT_TIMEOUT_MS).")
    var waitTimeoutMs: Int = Environment.value("WAIT_TIMEOUT_MS", default: 10_000)

    @Option(parsing: .unconditional, help: "Seconds between heartbeat comments on idle event streams (HEARTBEAT_S).")
    var heartbeatS: Int = Environment.value("HEARTBEAT_S", default: 15)

    @Option(help: "Comma-separated origins allowed by CORS, or * for any; empty disables CORS (CORS_ORIGINS).")
    var corsOrigins: String = Environment.string("CORS_ORIGINS", default: "")

    @Option(help: "Where sessions are kept: memory (lost on restart); sqlite:PATH, a SQLite file created when missing (sqlite:PATH?max_page_count=N caps its size in pages); or postgres://USER[:PASSWORD]@HOST[:PORT]/DB, a PostgreSQL database several nodes share (STORE).")
    var store: String = Environment.string("STORE", default: "sqlite:reactor-data/sessions.sqlite")

    @Option(help: "sync: an action is acknowledged, and a state shown, only once committed; async: at once, committed within --flush-interval-ms, so a crash may lose that window (DURABILITY).")
    var durability: String = Environment.string("DURABILITY", default: "sync")

    @Option(parsing: .unconditional, help: "With --durability async, the longest a write waits to be committed, in milliseconds (FLUSH_INTERVAL_MS).")
    var flushIntervalMs: Int = Environment.value("FLUSH_INTERVAL_MS", default: 10)

    @Option(parsing: .unconditional, help: "With a store, seconds an instance with no open stream and no action in flight stays in memory; its next request brings it back (PASSIVATE_AFTER_S).")
    var passivateAfterS: Int = Environment.value("PASSIVATE_AFTER_S", default: 60)

    @Option(parsing: .unconditional, help: "With a postgres store, seconds a node's claim on a session lasts unless renewed; after a node dies its sessions move to the others within about that long (LEASE_S).")
    var leaseS: Int = Environment.value("LEASE_S", default: 4)

    @Option(parsing: .unconditional, help: "With a postgres store, seconds a call may wait for the database before it fails: the request answers 503 and the connection is made again (STORE_TIMEOUT_S).")
    var storeTimeoutS: Int = Environment.value("STORE_TIMEOUT_S", default: Int(PostgresSessionStore.defaultTimeout.components.seconds))

    @Option(help: "With a postgres store, this node's name, unique among the nodes; a node restarted under the same name takes its sessions back at once. Default: the host name and port (NODE_ID).")
    var nodeId: String = Environment.string("NODE_ID", default: "")

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (LOG_LEVEL).")
    var logLevel: String = Environment.string("LOG_LEVEL", default: "info")

    @Option(help: "Log format: text, one readable line per entry; or json, one JSON object per line with timestamp, level, label, source, message and metadata, for log collectors (LOG_FORMAT).")
    var logFormat: String = Environment.string("LOG_FORMAT", default: "text")

    @Option(help: "Once listening, write the address (http://HOST:PORT) to this file, which `reactor-server health` reads; removed on a graceful stop (ADDRESS_FILE).")
    var addressFile: String = Environment.string("ADDRESS_FILE", default: "")

    @Option(help: "Where the spans of each action go: none; or otlp, to an OpenTelemetry collector over OTLP/HTTP as the OTEL_EXPORTER_OTLP_* variables say (default http://localhost:4318), in a build with the OTLP trait (TRACES).")
    var traces: String = Environment.string("TRACES", default: "none")

    func validate() throws {
        if let problem = Environment.firstProblem { throw ValidationError(problem) }
        guard ["none", "otlp"].contains(traces.lowercased()) else {
            throw ValidationError("\(Environment.setting("traces")) must be none or otlp, not '\(traces)'")
        }
        if traces.lowercased() == "otlp" && !TraceExport.isAvailable {
            throw ValidationError("\(Environment.setting("traces")) otlp needs a build with the OTLP trait: swift build -c release --traits OTLP")
        }
        guard ["sync", "async"].contains(durability.lowercased()) else {
            throw ValidationError("\(Environment.setting("durability")) must be sync or async, not '\(durability)'")
        }
        do {
            _ = try StoreLocation(store)
        } catch let error as ValidationError {
            throw ValidationError("\(error.message) (\(Environment.setting("store")))")
        }
        guard Logger.Level(rawValue: logLevel.lowercased()) != nil else {
            throw ValidationError("\(Environment.setting("log-level")) must be trace, debug, info, notice, warning, error or critical, not '\(logLevel)'")
        }
        guard ["text", "json"].contains(logFormat.lowercased()) else {
            throw ValidationError("\(Environment.setting("log-format")) must be text or json, not '\(logFormat)'")
        }
        for (name, value) in [("max-instances", maxInstances), ("max-streams", maxStreams),
                              ("max-streams-per-instance", maxStreamsPerInstance),
                              ("max-connections", maxConnections), ("max-body-bytes", maxBodyBytes),
                              ("max-header-bytes", maxHeaderBytes), ("heartbeat-s", heartbeatS),
                              ("idle-timeout-s", idleTimeoutS), ("wait-timeout-ms", waitTimeoutMs),
                              ("stall-timeout-ms", stallTimeoutMs), ("flush-interval-ms", flushIntervalMs),
                              ("passivate-after-s", passivateAfterS), ("lease-s", leaseS),
                              ("store-timeout-s", storeTimeoutS)]
        where value <= 0 {
            throw ValidationError("\(Environment.setting(name)) must be positive, not \(value)")
        }
        for (name, value) in [("counter-delay-ms", counterDelayMs), ("search-latency-ms", searchLatencyMs),
                              ("threads", threads), ("reactor-threads", reactorThreads),
                              ("history-size", historySize),
                              ("connection-timeout-s", connectionTimeoutS)]
        where value < 0 {
            throw ValidationError("\(Environment.setting(name)) must not be negative, not \(value)")
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
        let logger = Logger(label: "reactor-server")
        // Before any reactor exists: what the reactors record through swift-metrics reaches /metrics.
        ReactorServer.bootstrapMetrics()
        // Before the service exists too: it picks up the tracer the process bootstrapped.
        let traceExporter = traces.lowercased() == "otlp" ? try TraceExport.bootstrapOTLP(logger: logger) : nil

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
        // `validate` has checked it, so this does not throw.
        let location = try StoreLocation(store)
        do {
            service.store = try location.open(historyCapacity: historySize, node: nodeName, lease: .seconds(leaseS),
                                              timeout: .seconds(storeTimeoutS))
        } catch {
            logger.critical("could not open the session store: \(error)")
            // Also as a plain line, for a person reading a terminal; a log collector reading
            // JSON gets the entry above only.
            if !json { FileHandle.standardError.write(Data("reactor-server: \(error)\n".utf8)) }
            throw ExitCode(1)
        }
        if let sqlite = service.store as? SQLiteSessionStore, sqlite.isReadableByOthers {
            logger.warning("the session store is readable by other users; its ids are the sessions' credentials: chmod 600 it (and its -wal and -shm files)",
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
            logger.info("sessions kept in \(database), shared with the other nodes",
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

        // With a database the nodes share, the room's messages reach every node through it.
        var room = Room.shared
        if case .postgres(let database) = location {
            room = Room(channel: PostgresChannel(location: database, name: "reactor_room", logger: logger))
        }
        let registry = ExampleReactors.registry(counterDelay: .milliseconds(counterDelayMs),
                                                searchLatency: .milliseconds(searchLatencyMs), room: room)
        let server = ReactorServer(registry: registry, configuration: service, http: http, logger: logger)
        let (host, addressFile) = (self.host, self.addressFile)
        let announced = AnnouncedServer(server: server) { port in
            let address = ListenAddress(host: host, port: port)
            if !addressFile.isEmpty { try AddressFile.write(address.url, to: addressFile) }
            // The line a supervisor or test reads to learn the bound port.
            FileHandle.standardOutput.write(Data("reactor-server listening on \(address.url)\n".utf8))
        }
        // SIGTERM and SIGINT stop the server gracefully: the group traps them before it starts
        // the server, so a signal sent once the port is announced already stops it gracefully.
        // The exporter runs first and stops last (a group stops in reverse order), so the spans
        // of the server's last requests are sent.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let exporter = traceExporter { services.append(.init(service: exporter)) }
        services.append(.init(service: announced))
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
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
}

/// The server as `reactor-server` runs it in its service group: started, announced (the
/// address file, the line on standard output), then served until the group stops it.
struct AnnouncedServer: Service {
    let server: ReactorServer
    let announce: @Sendable (UInt16) throws -> Void

    func run() async throws {
        try server.start()
        do {
            try announce(server.port)
        } catch {
            server.shutdown()
            throw error
        }
        try await server.run()
    }
}

/// What the service group's signal handling leaves out: a second SIGTERM or SIGINT while the
/// server stops exits 1 at once. (The first also asks the group to stop, which it does by its
/// own handlers too; asking twice is harmless.)
enum StopSignals {
    static func install(_ signals: [Int32], group: ServiceGroup, logger: Logger) -> [any DispatchSourceSignal] {
        let queue = DispatchQueue(label: "reactor-server.signals")
        let received = SignalCount()
        return signals.map { signalNumber in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
            source.setEventHandler {
                guard received.next() > 1 else {
                    Task { await group.triggerGracefulShutdown() }
                    return
                }
                logger.warning("second signal while stopping: exiting now", metadata: ["signal": "\(signalNumber)"])
                exit(1)
            }
            source.resume()
            return source
        }
    }
}

/// Signals received so far.
private final class SignalCount: Sendable {
    private let count = Atomic<Int>(0)

    /// One more; the count with it.
    func next() -> Int { count.wrappingAdd(1, ordering: .relaxed).newValue }
}

/// The file `--address-file` names: written whole or not at all (a new file renamed over it),
/// so a health check never reads half an address.
enum AddressFile {
    static func write(_ text: String, to path: String) throws {
        let temporary = path + ".\(getpid()).tmp"
        try Data((text + "\n").utf8).write(to: URL(fileURLWithPath: temporary))
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
    }
}

/// Where `--store` says sessions are kept.
enum StoreLocation {
    case memory
    case sqlite(path: String, maxPageCount: Int?)
    case postgres(PostgresLocation)

    /// Parses `text`, naming it `name` (the option or argument it came from) in what it refuses.
    init(_ text: String, name: String = "--store") throws {
        if text == "memory" {
            self = .memory
            return
        }
        if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            guard let location = PostgresLocation(url: text) else {
                throw ValidationError("\(name) postgres:// needs a user, a host and a database: postgres://USER[:PASSWORD]@HOST[:PORT]/DB")
            }
            self = .postgres(location)
            return
        }
        guard text.hasPrefix("sqlite:") else {
            throw ValidationError("\(name) must be memory, sqlite:PATH or postgres://USER@HOST[:PORT]/DB, not '\(text)'")
        }
        var path = String(text.dropFirst("sqlite:".count))
        var maxPageCount: Int?
        if let query = path.firstIndex(of: "?") {
            let option = path[path.index(after: query)...]
            path = String(path[..<query])
            guard option.hasPrefix("max_page_count="), let pages = Int(option.dropFirst("max_page_count=".count)), pages > 0 else {
                throw ValidationError("\(name) sqlite:PATH takes only ?max_page_count=N (a positive number), not '?\(option)'")
            }
            maxPageCount = pages
        }
        guard !path.isEmpty else { throw ValidationError("\(name) sqlite:PATH needs a path") }
        self = .sqlite(path: path, maxPageCount: maxPageCount)
    }

    /// The store, opened; nil for memory.
    func open(historyCapacity: Int, node: String, lease: Duration, timeout: Duration) throws -> (any SessionStore)? {
        switch self {
        case .memory: return nil
        case .sqlite(let path, let maxPageCount):
            return try SQLiteSessionStore(path: path, historyCapacity: historyCapacity, maxPageCount: maxPageCount)
        case .postgres(let location):
            return try PostgresSessionStore(location: location, node: node, lease: lease, historyCapacity: historyCapacity,
                                            timeout: timeout, logger: Logger(label: "reactor-server.postgres"))
        }
    }
}

/// Reads option defaults from the environment. A variable that is set (and not empty) must hold
/// a value its option accepts: one that does not is kept as a problem, which `validate()`
/// reports naming the variable and its option, rather than silently falling back to the default.
enum Environment {
    private static let problems = Mutex<[String: String]>([:])

    static func string(_ name: String, default fallback: String) -> String {
        ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 } ?? fallback
    }

    static func value<Value: LosslessStringConvertible>(_ name: String, default fallback: Value) -> Value {
        guard let text = ProcessInfo.processInfo.environment[name], !text.isEmpty else { return fallback }
        guard let value = Value(text.trimmingCharacters(in: .whitespaces)) else {
            let kind = Value.self == UInt16.self ? "a port number from 0 to 65535" : "a whole number"
            problems.withLock {
                $0[name] = "\(name)='\(text.prefix(64))' is not \(kind) (the environment variable of --\(flag(name)))"
            }
            return fallback
        }
        return value
    }

    /// The first invalid environment value met so far, by name.
    static var firstProblem: String? {
        problems.withLock { problems in problems.keys.sorted().first.flatMap { problems[$0] } }
    }

    /// `--max-body-bytes (MAX_BODY_BYTES)` for `max-body-bytes`: how messages name a setting.
    static func setting(_ flag: String) -> String {
        "--\(flag) (\(flag.uppercased().replacingOccurrences(of: "-", with: "_")))"
    }

    /// `max-body-bytes` for `MAX_BODY_BYTES`.
    private static func flag(_ variable: String) -> String {
        variable.lowercased().replacingOccurrences(of: "_", with: "-")
    }
}
