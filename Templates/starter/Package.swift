// swift-tools-version:6.2
import PackageDescription

// The service depends on a release of ReactorServer. REACTOR_SERVER_CHECKOUT, when set, names a
// local checkout to build against instead (ReactorServer's own tests build this starter so).
let checkout = Context.environment["REACTOR_SERVER_CHECKOUT"].flatMap { $0.isEmpty ? nil : $0 }
let reactorServer: Package.Dependency =
    checkout.map { .package(path: $0) }
    ?? .package(url: "https://github.com/reactorserver/reactor-server.git", .upToNextMinor(from: "0.4.0"))
// A package is named by the last part of its path or URL.
let reactorServerPackage = checkout.map { String($0.split(separator: "/").last ?? "reactor-server") } ?? "reactor-server"

let package = Package(
    name: "MyService",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .executable(name: "my-service", targets: ["MyService"]),
        // The reactors alone, for an app that shares their Action and State types.
        .library(name: "MyReactors", targets: ["MyReactors"]),
    ],
    dependencies: [reactorServer],
    targets: [
        // The reactors: ReactorCore only, so they build for iOS as well as for the server.
        .target(name: "MyReactors", dependencies: [.product(name: "ReactorCore", package: reactorServerPackage)]),
        // The service: the reactors registered in a ReactorServiceApp.
        .executableTarget(
            name: "MyService",
            dependencies: ["MyReactors", .product(name: "ReactorServerKit", package: reactorServerPackage)]
        ),
        .testTarget(
            name: "MyReactorsTests",
            dependencies: ["MyReactors", .product(name: "ReactorTesting", package: reactorServerPackage)]
        ),
    ],
    swiftLanguageModes: [.v6]
)
