// swift-tools-version:6.0
import PackageDescription

// The Hummingbird 2 baselines.
// - hb-reactors: the same example reactors from ReactorExamples served through the same routes,
//   so `Benchmarks/run` can compare ReactorServer against the Swift server a user would pick.
// - hb-grdb: the counter as a durable service written without ReactorServer (Hummingbird 2 and
//   GRDB, one SQLite transaction per request), the peer of `Benchmarks/durability/run`.
// Each script builds only its own product (`--product`), so neither waits for the other's
// dependencies.
let package = Package(
    name: "hb-reactors",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "ReactorServer", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
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
        .executableTarget(
            name: "hb-grdb",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
