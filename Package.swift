// swift-tools-version:6.2
import PackageDescription

/// A build-time value from the environment (`make` and the Dockerfile set them from git), kept to
/// the characters a version or a commit hash has; "unknown" when unset. Nothing is generated or
/// committed: the value reaches the compiler as a define of the one small C target below.
func buildValue(_ name: String) -> String {
    let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_+")
    let value = String((Context.environment[name] ?? "").filter { allowed.contains($0) }.prefix(80))
    return value.isEmpty ? "unknown" : value
}

/// Set by `make docs`. SwiftPM builds the symbol graphs of a documentation build with every trait
/// on (swiftlang/swift-package-manager#10448), so the OTLP trait would have it build swift-otel,
/// async-http-client and swift-protobuf, minutes of compiling, for pages that are the same without
/// them: the exporter behind the trait is internal. A documentation build leaves the trait out.
let documenting = Context.environment["REACTOR_SERVER_DOCS"] != nil

// The layers, each depending only on those below it:
//   reactor-server → ReactorHTTP → ReactorHosting → ReactorCore
// with MicroHTTP (over CMicroHTTPD) and SortedJSON beside them; and for apps
//   ReactorClient → ReactorCore (no server code).
let package = Package(
    name: "ReactorServer",
    // ReactorCore and ReactorTesting also build for apps, so that an app shares its reactors'
    // Action and State types with the server.
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "ReactorCore", targets: ["ReactorCore"]),
        .library(name: "ReactorTesting", targets: ["ReactorTesting"]),
        .library(name: "SortedJSON", targets: ["SortedJSON"]),
        .library(name: "ReactorHosting", targets: ["ReactorHosting"]),
        .library(name: "ReactorStoreSQLite", targets: ["ReactorStoreSQLite"]),
        .library(name: "ReactorStorePostgres", targets: ["ReactorStorePostgres"]),
        .library(name: "MicroHTTP", targets: ["MicroHTTP"]),
        .library(name: "ReactorHTTP", targets: ["ReactorHTTP"]),
        .library(name: "ReactorExamples", targets: ["ReactorExamples"]),
        // All a team's service imports: its executable's `main` is a ReactorServiceApp.
        .library(name: "ReactorServerKit", targets: ["ReactorServerKit"]),
        .executable(name: "reactor-server", targets: ["reactor-server"]),
        .library(name: "ReactorClient", targets: ["ReactorClient"]),
        .executable(name: "reactor-client-demo", targets: ["reactor-client-demo"]),
    ],
    // `swift build --traits OTLP` adds an OTLP/HTTP trace exporter to `reactor-server`
    // (`--traces otlp`). Off by default: swift-otel and what it needs take minutes to build.
    traits: documenting
        ? []
        : [.trait(name: "OTLP", description: "reactor-server can export traces over OTLP/HTTP (swift-otel).")],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // Only with the OTLP trait, and only its OTLP/HTTP exporter.
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
        // Already in the graph through postgres-nio: ReactorServer is a Service of it.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // `make docs`: the DocC catalogs of the products a user imports (a plugin: nothing of it
        // is linked into them).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // `--auth jwt`: JSON Web Token verification (HS256, RS256, ES256, EdDSA; JWKS).
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.1"),
    ],
    targets: [
        // The package's synchronisation primitives over pthreads (which ThreadSanitizer
        // understands): a locked value, a set-once reference, a start gate, thread start.
        .target(name: "Locking"),

        // The reactor: protocol, Mutations, Flow, Pulse and the per-instance runtime. Swift
        // concurrency and locks only: no threads of its own, no HTTP, no storage, no C.
        .target(name: "ReactorCore", dependencies: ["Locking"]),
        // Helpers for testing reactors: a manual clock and a state recorder.
        .target(name: "ReactorTesting", dependencies: ["ReactorCore", "Locking"]),
        // Counter, Todo, Search and Room example reactors, written as a user would.
        .target(name: "ReactorExamples", dependencies: ["ReactorCore", "Locking", .product(name: "Metrics", package: "swift-metrics")]),

        // The sorted-key JSON encoder: equal states give equal bytes, at a fraction of
        // Foundation's cost.
        .target(name: "SortedJSON"),

        // Many instances: registry, instance table and lifecycle, the threads applying actions
        // and their stall watchdog, versioned timelines with history and fan-out, and the
        // session store protocol with its in-memory store. Knows nothing of HTTP.
        .target(
            name: "ReactorHosting",
            dependencies: [
                "ReactorCore",
                "SortedJSON",
                "Locking",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),

        // SQLite, from Debian's libsqlite3-dev.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // The embedded session store: a SQLite file in WAL mode, through SQLite's C API.
        .target(name: "ReactorStoreSQLite", dependencies: ["ReactorHosting", "CSQLite", "Locking"]),
        // The store several nodes share: PostgreSQL through PostgresNIO, with a lease and a
        // fencing epoch per session so that one node at a time serves it; and a cluster channel
        // over LISTEN/NOTIFY for global state that spans the nodes.
        .target(
            name: "ReactorStorePostgres",
            dependencies: [
                "ReactorHosting",
                "ReactorCore",
                "Locking",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // libmicrohttpd, from Debian's libmicrohttpd-dev.
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        // Puts the server's own error responses in place of libmicrohttpd's built-in HTML pages.
        .target(name: "CMicroHTTPDErrorPages", dependencies: ["CMicroHTTPD"]),
        // A small general HTTP/1.1 server over libmicrohttpd. Knows nothing of reactors.
        .target(name: "MicroHTTP", dependencies: ["CMicroHTTPD", "CMicroHTTPDErrorPages", "Locking"]),

        // The version and commit of this build (REACTOR_SERVER_VERSION, REACTOR_SERVER_COMMIT).
        .target(
            name: "CReactorBuildInfo",
            cSettings: [
                .define("REACTOR_BUILD_VERSION", to: "\"\(buildValue("REACTOR_SERVER_VERSION"))\""),
                .define("REACTOR_BUILD_COMMIT", to: "\"\(buildValue("REACTOR_SERVER_COMMIT"))\""),
            ]
        ),

        // The HTTP face of ReactorHosting: routes, action bodies, server-sent events,
        // problem+json, metrics and CORS. Knows nothing of databases.
        .target(
            name: "ReactorHTTP",
            dependencies: [
                "ReactorHosting",
                "ReactorCore",
                "SortedJSON",
                "MicroHTTP",
                "Locking",
                "CReactorBuildInfo",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            // The inspector's pages, scripts and styles, compiled into the binary.
            resources: [.embedInCode("Inspector/Assets")]
        ),
        // A team's own service in one import: a ReactorServiceApp registers its reactors and
        // gets the whole command line (serve with every flag, health, backup, restore, check,
        // compact, copy), logging, signals, the stores and traces.
        .target(
            name: "ReactorServerKit",
            dependencies: [
                "Locking",
                "ReactorCore",
                "ReactorHTTP",
                "ReactorHosting",
                "ReactorStoreSQLite",
                "ReactorStorePostgres",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ] + (documenting ? [] : [.product(name: "OTel", package: "swift-otel", condition: .when(traits: ["OTLP"]))])
        ),
        // The example reactors served by ReactorServerKit: the first such service.
        .executableTarget(name: "reactor-server", dependencies: ["ReactorServerKit", "ReactorExamples"]),

        // The Swift client for apps: RemoteReactor binds an instance on a server as if it were
        // local, over URLSession (FoundationNetworking on Linux). No server code.
        .target(name: "ReactorClient", dependencies: ["ReactorCore", "Locking"]),
        // A command-line demo of the client against `make run`: a counter, its states as they stream.
        .executableTarget(name: "reactor-client-demo", dependencies: ["ReactorClient", "ReactorExamples"]),

        // Test support: starts the programs the tests talk to (the server, curl, Python clients)
        // with posix_spawn and ends them by PID.
        .target(name: "CProcessSpawning", path: "Tests/CProcessSpawning"),
        .target(name: "ProcessSpawning", dependencies: ["CProcessSpawning", "Locking"], path: "Tests/ProcessSpawning"),
        // Test support: a seeded random generator, so a failing random sequence can be replayed;
        // waits off the concurrency pool; scratch directories that remove themselves.
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        // Store test support: sample sessions written as a server writes them, for any store.
        .target(name: "StoreTestSupport", dependencies: ["ReactorHosting"], path: "Tests/StoreTestSupport"),
        .testTarget(name: "ProcessSpawningTests", dependencies: ["ProcessSpawning", "Locking"]),
        .testTarget(
            name: "ReactorCoreTests",
            dependencies: ["ReactorCore", "ReactorTesting", "ReactorExamples", "Locking", "TestSupport"]
        ),
        .testTarget(name: "SortedJSONTests", dependencies: ["SortedJSON", "ReactorCore", "ReactorExamples", "TestSupport"]),
        .testTarget(
            name: "ReactorHostingTests",
            dependencies: [
                "ReactorHosting", "ReactorCore", "ReactorTesting", "ReactorExamples", "SortedJSON", "Locking", "TestSupport",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        .testTarget(
            name: "ReactorStoreSQLiteTests",
            dependencies: [
                "ReactorStoreSQLite", "ReactorHosting", "Locking", "ReactorCore", "ReactorExamples", "SortedJSON",
                "StoreTestSupport", "TestSupport",
            ]
        ),
        // Needs a PostgreSQL server: `make test` starts one (Tests/python/cluster.py with-postgres).
        .testTarget(
            name: "ReactorStorePostgresTests",
            dependencies: [
                "ReactorStorePostgres", "ReactorStoreSQLite", "ReactorHosting", "Locking", "StoreTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "MicroHTTPTests", dependencies: ["MicroHTTP", "Locking", "ProcessSpawning", "TestSupport"], exclude: ["Clients"]),
        .testTarget(
            name: "ReactorHTTPTests",
            dependencies: [
                "ReactorHTTP", "ReactorHosting", "ReactorCore", "ReactorExamples", "ReactorClient", "SortedJSON", "MicroHTTP",
                "Locking", "ProcessSpawning", "TestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        // A package written against an earlier release: its code and imports, which must still
        // compile and serve.
        .testTarget(name: "LegacyAPITests", dependencies: ["ReactorCore", "ReactorHosting", "ReactorHTTP", "MicroHTTP"]),
        // The service kit's own parts: JSON Web Token verification (jwt-kit signs the tokens),
        // and what an app sees through its one import.
        .testTarget(
            name: "ReactorServerKitTests",
            dependencies: ["ReactorServerKit", "Locking", .product(name: "JWTKit", package: "jwt-kit")]
        ),
        // Starts its own reactor-server (built next to the test bundle) on 127.0.0.1, or one in
        // the test's process where a test needs an `Authenticator` of its own.
        .testTarget(
            name: "ReactorClientTests",
            dependencies: [
                "ReactorClient", "ReactorCore", "ReactorExamples", "ProcessSpawning", "Locking", "ReactorHTTP", "ReactorHosting",
                "TestSupport",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
