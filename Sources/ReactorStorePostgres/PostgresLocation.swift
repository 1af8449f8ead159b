import Foundation
import PostgresNIO

/// Where a PostgreSQL session store is: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`
/// (`postgresql://` too; the port defaults to 5432).
public struct PostgresLocation: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var user: String
    public var password: String?
    public var database: String

    /// A location.
    public init(host: String, port: Int = 5432, user: String, password: String? = nil, database: String) {
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.database = database
    }

    /// Parses a `postgres://` URL; nil when `text` is not one with a user, a host and a database.
    public init?(url text: String) {
        guard text.hasPrefix("postgres://") || text.hasPrefix("postgresql://"),
            let components = URLComponents(string: text),
            let host = components.host, !host.isEmpty,
            let user = components.user, !user.isEmpty
        else { return nil }
        let database = String(components.path.drop { $0 == "/" })
        guard !database.isEmpty, !database.contains("/") else { return nil }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { return nil }
        self.init(
            host: host, port: port, user: user.removingPercentEncoding ?? user,
            password: components.password.map { $0.removingPercentEncoding ?? $0 },
            database: database.removingPercentEncoding ?? database)
    }

    /// The location without its password, as messages and logs name it.
    public var description: String { "postgres://\(user)@\(host):\(port)/\(database)" }

    /// How PostgresNIO connects there (no TLS: the database is on the nodes' own network).
    var connectionConfiguration: PostgresConnection.Configuration {
        PostgresConnection.Configuration(
            host: host, port: port, username: user, password: password,
            database: database, tls: .disable)
    }
}
