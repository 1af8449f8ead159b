import ArgumentParser
import Foundation
import ReactorHosting

/// The `--store` option of the commands that work on a store (`backup`, `restore`, `check`,
/// `compact`): read as the server reads it, so in the image they need no argument for it.
struct SQLiteStoreOption: ParsableArguments {
    @Option(
        help:
            "The store: sqlite:PATH, or for backup and restore postgres://USER[:PASSWORD]@HOST[:PORT]/DB, as the server's --store (STORE).")
    var store: String = ServiceEnvironment.string("STORE", default: "sqlite:reactor-data/sessions.sqlite")

    /// Where `--store` says sessions are kept. The variables of `serve`'s options (and the
    /// app's) are not this command's: one that `serve` would refuse does not stop it.
    func location() throws -> StoreLocation {
        try StoreLocation(store, name: ServiceEnvironment.setting("store"))
    }

    /// The SQLite file `--store` names; refuses a memory or PostgreSQL store, saying what to
    /// use instead of `verb` ("back up", "restore", "check", "compact").
    func path(toVerb verb: String, postgresInstead: String) throws -> String {
        switch try location() {
        case .memory:
            throw ValidationError("\(ServiceEnvironment.setting("store")) is memory: nothing is kept, so there is nothing to \(verb)")
        case .postgres:
            throw ValidationError("\(ServiceEnvironment.setting("store")) is a PostgreSQL database: \(postgresInstead)")
        case .sqlite(let path, _):
            return path
        }
    }

    /// Runs `body`, turning a store error into a message on standard error and exit status 1.
    static func reporting<Result>(_ what: String, _ body: () throws(SessionStoreError) -> Result) throws -> Result {
        do {
            return try body()
        } catch {
            FileHandle.standardError.write(Data("\(what) failed: \(error.message)\n".utf8))
            throw ExitCode(1)
        }
    }
}
