import CSQLite
import Foundation
import ReactorHosting

/// Checks a session store's file, or a backup of one, with SQLite's integrity check, table by
/// table: every page of every table and index read and cross-checked. It only reads (the
/// connection is read-only), so it runs beside a server serving the store, and never writes a
/// damaged file.
public enum SQLiteStoreCheck {
    /// What the check found.
    public struct Report: Sendable, Equatable {
        /// SQLite's findings, each naming its table, at most ``problemLimit``; empty when the
        /// file is whole.
        public var problems: [String]
        /// The sessions the file holds, when they could be counted.
        public var sessions: Int?

        /// Whether nothing was found wrong.
        public var isWhole: Bool { problems.isEmpty }
    }

    /// Most findings reported.
    public static let problemLimit = 100

    /// Checks the session store at `path`.
    /// - Throws: ``SessionStoreError`` when the file is missing, is not a session store, or
    ///   cannot be read at all.
    public static func check(_ path: String) throws(SessionStoreError) -> Report {
        let connection = try StoreFileCopy.openStore(path, readOnly: true)
        var problems: [String] = []
        for table in try tables(connection) where problems.count < problemLimit {
            problems += findings(in: table, on: connection).prefix(problemLimit - problems.count)
        }
        // A damaged store may not be countable.
        let sessions = try? SQLiteSessionStore.countSessions(on: connection)
        return Report(problems: problems, sessions: sessions)
    }

    /// The database's tables, by name.
    private static func tables(_ connection: SQLiteConnection) throws(SessionStoreError) -> [String] {
        let statement = try connection.statement("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        defer { statement.reset() }
        var names: [String] = []
        while try statement.next() { names.append(statement.text(0)) }
        return names
    }

    /// What SQLite's integrity check finds wrong with `table` and its indexes; a table too
    /// damaged for the check to go through is one finding.
    private static func findings(in table: String, on connection: SQLiteConnection) -> [String] {
        let quoted = table.replacingOccurrences(of: "'", with: "''")
        var found: [String] = []
        do {
            let check = try connection.statement("PRAGMA integrity_check('\(quoted)')")
            defer { check.reset() }
            while try check.next() {
                let finding = check.text(0)
                guard finding != "ok" else { continue }
                // One line each, without SQLite's heading of the database checked.
                for line in finding.split(separator: "\n") where !line.hasPrefix("*** in database") {
                    found.append("\(table): \(line)")
                }
            }
        } catch {
            found.append("\(table): SQLite could not read it through (\(String(cString: sqlite3_errmsg(connection.handle))))")
        }
        return found
    }
}
