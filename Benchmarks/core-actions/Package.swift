// swift-tools-version:6.0
import PackageDescription

// Throughput of the reactor runtime's hot path (core-actions) and of the service's request
// handling without sockets (request-path).
// Not part of the root package; run it with ./run.
let package = Package(
    name: "core-actions",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "ReactorServer", path: "../.."),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        // Counts calls to malloc and friends by replacing them in the executable (glibc).
        .target(name: "MallocCounter"),
        .executableTarget(
            name: "core-actions",
            dependencies: [
                "MallocCounter",
                .product(name: "ReactorCore", package: "ReactorServer"),
                .product(name: "ReactorExamples", package: "ReactorServer"),
            ]
        ),
        // The service's request handling without sockets: router → route → reactor → response.
        .executableTarget(
            name: "request-path",
            dependencies: [
                "MallocCounter",
                .product(name: "MicroHTTP", package: "ReactorServer"),
                .product(name: "ReactorHTTP", package: "ReactorServer"),
                .product(name: "ReactorHosting", package: "ReactorServer"),
                .product(name: "ReactorExamples", package: "ReactorServer"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
