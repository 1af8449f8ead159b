import ArgumentParser
import Foundation
import ReactorHosting
import ReactorStoreSQLite

/// `reactor-server backup FILE`: copies the SQLite session store to a new file while the server
/// keeps running, so a container without the `sqlite3` shell can be backed up:
/// `docker compose exec reactor-server reactor-server backup /data/backup.sqlite`.
struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copies the SQLite session store to a new file, consistent as of one moment; safe while the server runs.",
        discussion: "The copy holds every commit made before it began, compacted into one file, and is checked and synced to disk before it takes its name. `reactor-server restore FILE` puts it back."
    )

    @OptionGroup var store: SQLiteStoreOption

    @Argument(help: "The file to write the copy to; it must not exist.")
    var destination: String

    func validate() throws {
        guard !destination.isEmpty else { throw ValidationError("the backup needs a file to write") }
    }

    func run() throws {
        let path = try store.path(toVerb: "back up", postgresInstead: "back it up with pg_dump")
        let summary = try SQLiteStoreOption.reporting("backup") { () throws(SessionStoreError) in
            try SQLiteBackup.copy(from: path, to: destination)
        }
        print("backed up \(summary.sessions) session\(summary.sessions == 1 ? "" : "s") from \(path) to \(destination) (\(summary.bytes) bytes)")
    }
}
