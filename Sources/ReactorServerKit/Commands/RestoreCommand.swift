import ArgumentParser
import Foundation
import ReactorHosting
import ReactorStorePostgres
import ReactorStoreSQLite

/// `reactor-server restore FILE`: puts a backup in the session store's place while no server
/// serves it, keeping what it replaces: a SQLite store beside it, a PostgreSQL database's
/// sessions in a backup beside `FILE`.
struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Puts a backup in the session store's place (SQLite or PostgreSQL); the servers must be stopped.",
        discussion:
            "SQLite: the backup is checked and copied beside the store, then takes its name in one rename; the store it replaces is kept as PATH.before-restore-TIMESTAMP, its write-ahead log with it. PostgreSQL: in one transaction, the database's sessions are copied to a new file, FILE.replaced-TIMESTAMP, and replaced by the backup's. A server serving the store makes the restore refuse, and a restore cut off leaves the old sessions or the backup's, never a mix. Sessions that go back to an earlier state resume their versions past those the replaced store reached."
    )

    @OptionGroup var store: SQLiteStoreOption

    @Argument(help: "The backup to restore (a file the `backup` command wrote, or any session store).")
    var backup: String

    func validate() throws {
        guard !backup.isEmpty else { throw ValidationError("the restore needs a backup to read") }
    }

    func run() throws {
        if case .postgres(let location) = try store.location() {
            try restore(into: location)
            return
        }
        let path = try store.path(toVerb: "restore", postgresInstead: "")
        let summary = try SQLiteStoreOption.reporting("restore") { () throws(SessionStoreError) in
            try SQLiteRestore.restore(from: backup, to: path)
        }
        print(
            "restored \(summary.sessions) session\(summary.sessions == 1 ? "" : "s") from \(backup) to \(path)"
                + (summary.keptAside.map { "; the store it replaced is kept at \($0)" } ?? ""))
        if let wentBack = summary.wentBack {
            reportWentBack(wentBack)
        } else if summary.keptAside != nil {
            print(
                "the replaced store could not be read: clients that saw its later versions are told, "
                    + "when they resume, that the session went back (event: rewound)")
        }
    }

    private func reportWentBack(_ wentBack: Int) {
        print(
            wentBack == 1
                ? "1 session goes back to an earlier state; its versions go on past those the replaced store reached"
                : "\(wentBack) sessions go back to an earlier state; their versions go on past those the replaced store reached")
    }

    /// Restores the backup into a PostgreSQL database: refuses while nodes serve its sessions;
    /// in one transaction, backs its sessions up beside the backup and replaces them.
    private func restore(into location: PostgresLocation) throws {
        // A name of its own, even for a second restore within the same second.
        let stamp = "\(backup).replaced-\(SQLiteRestore.stamp(Date()))"
        let aside =
            sequence(first: 1) { $0 + 1 }.lazy.map { $0 == 1 ? stamp : "\(stamp)-\($0)" }
            .first { !FileManager.default.fileExists(atPath: $0) } ?? stamp
        let (restored, kept, wentBack) = try SQLiteStoreOption.reporting("restore") {
            () throws(SessionStoreError) -> (SessionCopy.Summary, Int, Int?) in
            let source = try SQLiteBackupSource(path: backup, historyCapacity: SessionCopy.wholeHistory)
            defer { source.close() }
            var keptAside: SQLiteSessionImport?
            do throws(SessionStoreError) {
                let replacing = try PostgresSessionImport(location: location, replacing: true) { () throws(SessionStoreError) in
                    let made = try SQLiteSessionImport(path: aside)
                    keptAside = made
                    return made
                }
                let restored = try SessionCopy.copy(from: source, into: replacing)
                return (restored, replacing.replacedSessions, replacing.wentBack)
            } catch {
                // Nothing was replaced: the database's sessions are where they were, so the copy
                // of them made meanwhile, if it was, goes.
                if keptAside?.isCommitted == true { unlink(aside) }
                throw error
            }
        }
        let replaced =
            kept == 0
            ? "the database held none"
            : "the \(kept) session\(kept == 1 ? "" : "s") it replaced \(kept == 1 ? "is" : "are") kept at \(aside)"
        print("restored \(restored.sessions) session\(restored.sessions == 1 ? "" : "s") from \(backup) to \(location); \(replaced)")
        if kept > 0 { reportWentBack(wentBack ?? 0) }
    }
}
