import ArgumentParser
import Foundation
import ReactorHosting
import ReactorStoreSQLite

/// `reactor-server restore FILE`: puts a backup in the SQLite session store's place while no
/// server runs on it, keeping the store it replaces beside it.
struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Puts a backup in the SQLite session store's place; the server must be stopped.",
        discussion: "The backup is checked and copied beside the store, then takes its name in one rename; the store it replaces is kept as PATH.before-restore-TIMESTAMP, its write-ahead log with it. A server running on the store makes the restore refuse, and a restore cut off leaves the old store or the backup, never a mix."
    )

    @OptionGroup var store: SQLiteStoreOption

    @Argument(help: "The backup to restore (a file `reactor-server backup` wrote, or any session store).")
    var backup: String

    func validate() throws {
        guard !backup.isEmpty else { throw ValidationError("the restore needs a backup to read") }
    }

    func run() throws {
        let path = try store.path(toVerb: "restore", postgresInstead: "restore it with pg_restore or psql")
        let summary = try SQLiteStoreOption.reporting("restore") { () throws(SessionStoreError) in
            try SQLiteRestore.restore(from: backup, to: path)
        }
        print("restored \(summary.sessions) session\(summary.sessions == 1 ? "" : "s") from \(backup) to \(path)"
              + (summary.keptAside.map { "; the store it replaced is kept at \($0)" } ?? ""))
        if let wentBack = summary.wentBack {
            print(wentBack == 1
                  ? "1 session goes back to an earlier state; its versions go on past those the replaced store reached"
                  : "\(wentBack) sessions go back to an earlier state; their versions go on past those the replaced store reached")
        } else if summary.keptAside != nil {
            print("the replaced store could not be read: clients that saw its later versions are told, "
                  + "when they resume, that the session went back (event: rewound)")
        }
    }
}
