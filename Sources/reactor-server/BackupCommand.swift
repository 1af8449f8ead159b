import ArgumentParser
import Foundation
import ReactorHosting
import ReactorStorePostgres
import ReactorStoreSQLite

/// `reactor-server backup FILE`: copies the session store to a new SQLite file while the servers
/// keep running, so a container without the `sqlite3` shell can be backed up:
/// `docker compose exec reactor-server reactor-server backup /data/backup.sqlite`. A PostgreSQL
/// store is read as of one moment (``PostgresSnapshot``).
struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copies the session store (SQLite or PostgreSQL) to a new SQLite file, consistent as of one moment; safe while the servers run.",
        discussion: "The copy holds every commit made before it began, compacted into one file, and is checked and synced to disk before it takes its name. `reactor-server restore FILE` puts it back."
    )

    @OptionGroup var store: SQLiteStoreOption

    @Argument(help: "The file to write the copy to; it must not exist.")
    var destination: String

    func validate() throws {
        guard !destination.isEmpty else { throw ValidationError("the backup needs a file to write") }
    }

    func run() throws {
        if case .postgres(let location) = try store.location() {
            let summary = try SQLiteStoreOption.reporting("backup") { () throws(SessionStoreError) -> SessionCopy.Summary in
                let snapshot = try PostgresSnapshot(location: location, historyCapacity: SessionCopy.wholeHistory)
                defer { snapshot.close() }
                return try SessionCopy.copy(from: snapshot, into: try SQLiteSessionImport(path: destination), whileServed: true)
            }
            let bytes = ((try? FileManager.default.attributesOfItem(atPath: destination))?[.size] as? Int) ?? 0
            report(sessions: summary.sessions, from: "\(location)", bytes: bytes)
            return
        }
        let path = try store.path(toVerb: "back up", postgresInstead: "")
        let summary = try SQLiteStoreOption.reporting("backup") { () throws(SessionStoreError) in
            try SQLiteBackup.copy(from: path, to: destination)
        }
        report(sessions: summary.sessions, from: path, bytes: summary.bytes)
    }

    private func report(sessions: Int, from store: String, bytes: Int) {
        print("backed up \(sessions) session\(sessions == 1 ? "" : "s") from \(store) to \(destination) (\(bytes) bytes)")
    }
}
