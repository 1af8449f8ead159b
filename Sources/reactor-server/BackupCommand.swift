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
        discussion: "The copy holds every commit made before it began, compacted into one file, and is checked once written. To restore, stop the server and put the copy in the store's place (remove the store's -wal and -shm files with it)."
    )

    @Option(help: "The store to copy: sqlite:PATH, as the server's --store (STORE).")
    var store: String = Environment.string("STORE", default: "sqlite:reactor-data/sessions.sqlite")

    @Argument(help: "The file to write the copy to; it must not exist.")
    var destination: String

    func validate() throws {
        if let problem = Environment.firstProblem { throw ValidationError(problem) }
        guard !destination.isEmpty else { throw ValidationError("the backup needs a file to write") }
    }

    func run() throws {
        switch try StoreLocation(store) {
        case .memory:
            throw ValidationError("\(Environment.setting("store")) is memory: nothing is kept, so there is nothing to back up")
        case .postgres:
            throw ValidationError("\(Environment.setting("store")) is a PostgreSQL database: back it up with pg_dump")
        case .sqlite(let path, _):
            do {
                let summary = try SQLiteBackup.copy(from: path, to: destination)
                print("backed up \(summary.sessions) session\(summary.sessions == 1 ? "" : "s") from \(path) to \(destination) (\(summary.bytes) bytes)")
            } catch {
                FileHandle.standardError.write(Data("backup failed: \(error.message)\n".utf8))
                throw ExitCode(1)
            }
        }
    }
}
