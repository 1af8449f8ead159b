import ArgumentParser
import Foundation
import ReactorHosting
import ReactorStoreSQLite

/// `reactor-server compact`: gives the SQLite session store's free pages back to the file system
/// while no server runs on it.
struct CompactCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract:
            "Gives the free pages of the SQLite session store (those of deleted and expired sessions) back to the file system; the server must be stopped.",
        discussion:
            "SQLite rewrites the store in one transaction, which needs free space about the store's size: cut off or out of space, it leaves the store as it was. A server running on the store makes it refuse."
    )

    @OptionGroup var store: SQLiteStoreOption

    func run() throws {
        let path = try store.path(toVerb: "compact", postgresInstead: "PostgreSQL gives space back with VACUUM FULL")
        let summary = try SQLiteStoreOption.reporting("compact") { () throws(SessionStoreError) in
            try SQLiteCompaction.compact(path)
        }
        print(
            "compacted \(path), \(summary.sessions) session\(summary.sessions == 1 ? "" : "s"): "
                + "\(summary.bytesBefore) bytes before, \(summary.bytesAfter) after")
    }
}
