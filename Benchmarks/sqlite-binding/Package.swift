// swift-tools-version:6.0
import PackageDescription

// Two bindings of the same SQLite store write/read path, measured side by side by one executable:
// CAPIStore calls SQLite's C API through the CSQLite system-library module; GRDBStore goes
// through GRDB. Each variant is its own target so its release build time can be taken alone.
let package = Package(
    name: "sqlite-binding",
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .target(name: "CMallocStats"),
        .target(name: "Workload", dependencies: ["CMallocStats"]),
        .target(name: "CAPIStore", dependencies: ["CSQLite", "Workload"]),
        .target(name: "GRDBStore", dependencies: [.product(name: "GRDB", package: "GRDB.swift"), "Workload"]),
        .executableTarget(name: "sqlite-binding", dependencies: ["Workload", "CAPIStore", "GRDBStore"]),
    ],
    swiftLanguageModes: [.v6]
)
