// swift-tools-version:6.0
import PackageDescription

// The Hummingbird 2 baseline: the same example reactors from ReactorExamples served through the
// same routes, so `Benchmarks/run` can compare ReactorServer against the Swift server a user
// would pick instead.
let package = Package(
    name: "hb-reactors",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "ReactorServer", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
    ],
    targets: [
        .executableTarget(
            name: "hb-reactors",
            dependencies: [
                .product(name: "ReactorCore", package: "ReactorServer"),
                .product(name: "ReactorExamples", package: "ReactorServer"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
