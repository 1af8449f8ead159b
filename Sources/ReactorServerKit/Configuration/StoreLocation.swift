import ArgumentParser
import Logging
import ReactorHosting
import ReactorStorePostgres
import ReactorStoreSQLite

/// Where `--store` says sessions are kept.
enum StoreLocation {
    case memory
    case sqlite(path: String, maxPageCount: Int?)
    case postgres(PostgresLocation)

    /// Parses `text`, naming it `name` (the option or argument it came from) in what it refuses.
    init(_ text: String, name: String = "--store") throws {
        if text == "memory" {
            self = .memory
            return
        }
        if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            guard let location = PostgresLocation(url: text) else {
                throw ValidationError("\(name) postgres:// needs a user, a host and a database: postgres://USER[:PASSWORD]@HOST[:PORT]/DB")
            }
            self = .postgres(location)
            return
        }
        guard text.hasPrefix("sqlite:") else {
            throw ValidationError("\(name) must be memory, sqlite:PATH or postgres://USER@HOST[:PORT]/DB, not '\(text)'")
        }
        var path = String(text.dropFirst("sqlite:".count))
        var maxPageCount: Int?
        if let query = path.firstIndex(of: "?") {
            let option = path[path.index(after: query)...]
            path = String(path[..<query])
            guard option.hasPrefix("max_page_count="), let pages = Int(option.dropFirst("max_page_count=".count)), pages > 0 else {
                throw ValidationError("\(name) sqlite:PATH takes only ?max_page_count=N (a positive number), not '?\(option)'")
            }
            maxPageCount = pages
        }
        guard !path.isEmpty else { throw ValidationError("\(name) sqlite:PATH needs a path") }
        self = .sqlite(path: path, maxPageCount: maxPageCount)
    }

    /// The store, opened; nil for memory.
    func open(historyCapacity: Int, node: String, lease: Duration, timeout: Duration) throws -> (any SessionStore)? {
        switch self {
        case .memory: return nil
        case .sqlite(let path, let maxPageCount):
            return try SQLiteSessionStore(path: path, historyCapacity: historyCapacity, maxPageCount: maxPageCount)
        case .postgres(let location):
            return try PostgresSessionStore(
                location: location, node: node, lease: lease, historyCapacity: historyCapacity,
                timeout: timeout, logger: Logger(label: "reactor-server.postgres"))
        }
    }
}
