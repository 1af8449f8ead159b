// swift-tools-version:6.0
// A libFuzzer target over the service's action decoding and request handling. Build and run it
// with `Fuzz/run SECONDS` (it passes `--sanitize=fuzzer --sanitize=address`).
import PackageDescription

let package = Package(
    name: "ReactorServerFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "ReactorServer", path: "..")
    ],
    targets: [
        .executableTarget(
            name: "fuzz-requests",
            dependencies: [
                .product(name: "ReactorHTTP", package: "ReactorServer"),
                .product(name: "ReactorHosting", package: "ReactorServer"),
                .product(name: "ReactorExamples", package: "ReactorServer"),
                .product(name: "MicroHTTP", package: "ReactorServer"),
            ],
            // libFuzzer supplies `main`.
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        )
    ],
    swiftLanguageModes: [.v6]
)
