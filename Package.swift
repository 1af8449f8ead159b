// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ReactorServer",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ReactorCore", targets: ["ReactorCore"]),
        .library(name: "ReactorTesting", targets: ["ReactorTesting"]),
        .library(name: "MicroHTTP", targets: ["MicroHTTP"]),
        .library(name: "ReactorHTTP", targets: ["ReactorHTTP"]),
        .library(name: "ReactorExamples", targets: ["ReactorExamples"]),
        .executable(name: "reactor-server", targets: ["reactor-server"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    ],
    targets: [
        // A value behind a pthread mutex, shared by the runtime and the HTTP layers.
        .target(name: "Locking"),
        // The reactor runtime: pure Swift concurrency, no HTTP, no C.
        .target(name: "ReactorCore", dependencies: ["Locking"]),
        // Helpers for testing reactors: a manual clock and a state recorder.
        .target(name: "ReactorTesting", dependencies: ["ReactorCore", "Locking"]),
        // Counter, Todo, Search and Room example reactors.
        .target(name: "ReactorExamples", dependencies: ["ReactorCore", "Locking"]),

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

        // Reactors per session over HTTP/JSON and server-sent events.
        .target(
            name: "ReactorHTTP",
            dependencies: [
                "ReactorCore",
                "MicroHTTP",
                "Locking",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .executableTarget(
            name: "reactor-server",
            dependencies: [
                "ReactorHTTP",
                "ReactorExamples",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // Test support: starts the programs the tests talk to (the server, curl, Python clients)
        // with posix_spawn and ends them by PID.
        .target(name: "CProcessSpawning", path: "Tests/CProcessSpawning"),
        .target(name: "ProcessSpawning", dependencies: ["CProcessSpawning", "Locking"], path: "Tests/ProcessSpawning"),
        .testTarget(name: "ProcessSpawningTests", dependencies: ["ProcessSpawning", "Locking"]),
        .testTarget(
            name: "ReactorCoreTests",
            dependencies: ["ReactorCore", "ReactorTesting", "ReactorExamples", "Locking"]
        ),
        .testTarget(name: "MicroHTTPTests", dependencies: ["MicroHTTP", "Locking", "ProcessSpawning"], exclude: ["Clients"]),
        .testTarget(
            name: "ReactorHTTPTests",
            dependencies: ["ReactorHTTP", "ReactorCore", "ReactorExamples", "MicroHTTP", "Locking", "ProcessSpawning"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
