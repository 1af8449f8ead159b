import ArgumentParser
import Foundation
import Logging
import ReactorHosting
import ReactorStorePostgres
import ReactorStoreSQLite

/// `reactor-server copy DESTINATION`: copies every session of the store into another one that
/// holds none, such as from the embedded SQLite file to the PostgreSQL database several nodes
/// share, or back.
struct CopyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy",
        abstract:
            "Copies every session of the store (--store) into DESTINATION, a store holding none: from the SQLite file to a PostgreSQL database several nodes share, or back. The servers must be stopped.",
        discussion: """
            Each session is copied whole: its id, version, state, history, the actions it accepted and had not yet applied, \
            and the idempotency keys it remembers, so clients go on where they were against the new store. The store copied \
            from keeps its sessions as they were. DESTINATION is written all at once: a new SQLite file takes its name only when it is complete, \
            and PostgreSQL commits it in one transaction, so a copy cut off leaves nothing there.
            """
    )

    @Argument(
        help: "Where to copy to: sqlite:PATH (a new file) or postgres://USER[:PASSWORD]@HOST[:PORT]/DB (a database holding no sessions).")
    var destination: String

    @Option(help: "The store to copy from: sqlite:PATH or postgres://USER[:PASSWORD]@HOST[:PORT]/DB, as the server's --store (STORE).")
    var store: String = ServiceEnvironment.string("STORE", default: "sqlite:reactor-data/sessions.sqlite")

    func validate() throws {
        // Only STORE is this command's: a variable of `serve`'s options that `serve` would refuse
        // does not stop it.
        guard destination.hasPrefix("sqlite:") || destination.hasPrefix("postgres://") || destination.hasPrefix("postgresql://") else {
            throw ValidationError(
                "DESTINATION must be sqlite:PATH (a new file) or postgres://USER[:PASSWORD]@HOST[:PORT]/DB, not '\(destination)'")
        }
    }

    func run() throws {
        let from = try StoreLocation(store, name: ServiceEnvironment.setting("store"))
        let to = try StoreLocation(destination, name: "DESTINATION")
        let summary = try SQLiteStoreOption.reporting("copy") { () throws(SessionStoreError) -> SessionCopy.Summary in
            let source = try openSource(from)
            defer { source.close() }
            return try SessionCopy.copy(from: source, into: try openDestination(to))
        }
        func counted(_ count: Int, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }
        print(
            "copied \(counted(summary.sessions, "session")) (\(counted(summary.versions, "version")) of history, "
                + "\(counted(summary.pendingActions, "action")) not yet applied) "
                + "from \(Self.describe(from)) to \(Self.describe(to)), which the servers may now use; "
                + "\(Self.describe(from)) keeps its sessions as they were")
    }

    /// The store to read, which must exist: a SQLite file is opened as a server opens it (its
    /// lock refuses a server running on it), never made.
    private func openSource(_ location: StoreLocation) throws(SessionStoreError) -> any SessionExporting {
        switch location {
        case .memory:
            throw SessionStoreError(.unavailable, "--store memory keeps nothing, so there is nothing to copy")
        case .sqlite(let path, _):
            try SQLiteSessionStore.requireStore(at: path)
            return try SQLiteSessionStore(path: path, historyCapacity: SessionCopy.wholeHistory)
        case .postgres(let location):
            return try PostgresSessionStore(
                location: location, node: "copy-\(getpid())", lease: .seconds(4),
                historyCapacity: SessionCopy.wholeHistory, logger: Logger(label: "reactor-server.postgres"))
        }
    }

    private func openDestination(_ location: StoreLocation) throws(SessionStoreError) -> any SessionImport {
        switch location {
        case .memory:
            throw SessionStoreError(.unavailable, "memory keeps nothing: copy to sqlite:PATH or postgres://…")  // refused by validate()
        case .sqlite(let path, _):
            return try SQLiteSessionImport(path: path)
        case .postgres(let location):
            return try PostgresSessionImport(location: location)
        }
    }

    /// The store as messages name it (a PostgreSQL database without its password).
    private static func describe(_ location: StoreLocation) -> String {
        switch location {
        case .memory: "memory"
        case .sqlite(let path, _): path
        case .postgres(let location): "\(location)"
        }
    }
}
