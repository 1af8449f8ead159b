// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "microhttp-bench",
    dependencies: [.package(name: "ReactorServer", path: "../..")],
    targets: [
        .executableTarget(
            name: "microhttp-bench",
            dependencies: [.product(name: "MicroHTTP", package: "ReactorServer")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
