import ArgumentParser
import Foundation
import ReactorHosting
import ReactorStoreSQLite

/// `reactor-server check [FILE]`: SQLite's integrity check of the session store, or of a backup;
/// what to run when the server reports the store damaged, and on a backup before trusting it.
struct CheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Checks the SQLite session store (or a backup of it) page by page; exit status 0 when it is whole, 1 otherwise.",
        discussion:
            "It only reads, so it runs beside a server serving the store. A damaged store is reported, never repaired or written: restore a backup that checks whole (the `restore FILE` command)."
    )

    @OptionGroup var store: SQLiteStoreOption

    @Argument(help: "A file to check instead of the store: a backup, say.")
    var file: String?

    func run() throws {
        let path = try file ?? store.path(toVerb: "check", postgresInstead: "PostgreSQL checks its own pages (see its amcheck module)")
        let report = try SQLiteStoreOption.reporting("check") { () throws(SessionStoreError) in
            try SQLiteStoreCheck.check(path)
        }
        let sessions = report.sessions.map { " holds \($0) session\($0 == 1 ? "" : "s") and" } ?? ""
        guard report.isWhole else {
            print("damaged: \(path)\(sessions) did not pass SQLite's integrity check:")
            for problem in report.problems { print("  \(problem)") }
            throw ExitCode(1)
        }
        print("whole: \(path)\(sessions) passed SQLite's integrity check")
    }
}
