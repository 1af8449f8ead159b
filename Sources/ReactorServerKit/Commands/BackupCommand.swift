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
        abstract:
            "Copies the session store (SQLite or PostgreSQL) to a new SQLite file, consistent as of one moment; safe while the servers run.",
        discussion:
            "The copy holds every commit made before it began, compacted into one file, and is checked and synced to disk before it takes its name. The `restore FILE` command puts it back."
    )

    @OptionGroup var store: SQLiteStoreOption

    @Argument(help: "The file to write the copy to; it must not exist.")
    var destination: String

    func validate() throws {
        guard !destination.isEmpty else { throw ValidationError("the backup needs a file to write") }
    }

    func run() throws {
        let source: String
        let summary: SQLiteBackup.Summary
        if case .postgres(let location) = try store.location() {
            source = "\(location)"
            summary = try SQLiteStoreOption.reporting("backup") { () throws(SessionStoreError) in
                let snapshot = try PostgresSnapshot(location: location, historyCapacity: SessionCopy.wholeHistory)
                defer { snapshot.close() }
                return try SQLiteBackup.copy(from: snapshot, to: destination)
            }
        } else {
            source = try store.path(toVerb: "back up", postgresInstead: "")
            summary = try SQLiteStoreOption.reporting("backup") { () throws(SessionStoreError) in
                try SQLiteBackup.copy(from: source, to: destination)
            }
        }
        print(
            "backed up \(summary.sessions) session\(summary.sessions == 1 ? "" : "s") from \(source) to \(destination) (\(summary.bytes) bytes)"
        )
    }
}
