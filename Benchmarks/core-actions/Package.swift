// swift-tools-version:6.0
import PackageDescription

// Throughput of the reactor runtime's hot path: one CounterReactor, delay 0, no subscriber.
// Not part of the root package; run it with ./run.
let package = Package(
    name: "core-actions",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "ReactorServer", path: "../.."),
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
    ],
    swiftLanguageModes: [.v6]
)
