// swift-tools-version:6.2
import PackageDescription

// The state encoder of the `SortedJSON` target against Foundation's JSONEncoder.
let package = Package(
    name: "state-encoding",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "ReactorServer", path: "../..")],
    targets: [
        .executableTarget(
            name: "state-encoding",
            dependencies: [.product(name: "SortedJSON", package: "ReactorServer")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
