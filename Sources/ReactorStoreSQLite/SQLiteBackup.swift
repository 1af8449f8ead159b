#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import CSQLite
import Foundation
import ReactorHosting

/// A consistent copy of a session store, made while a server may be writing to it: one read
/// transaction copied with `VACUUM INTO`, so the copy holds every commit up to its start and
/// nothing after, compacted, in one file (no write-ahead log beside it).
public enum SQLiteBackup {
    /// What a backup holds.
    public struct Summary: Sendable, Equatable {
        /// Sessions in the copy.
        public var sessions: Int
        /// The copy's size in bytes.
        public var bytes: Int
    }

    /// Copies the store at `source` to `destination`, which must not exist yet, then checks the
    /// copy. The store's content is not changed; a file that is not a session store is refused.
    /// - Throws: ``SessionStoreError`` naming the file and what is wrong.
    public static func copy(from source: String, to destination: String) throws(SessionStoreError) -> Summary {
        guard FileManager.default.fileExists(atPath: source) else {
            throw SessionStoreError(.unavailable, "there is no session store at \(source)")
        }
        let store = try SQLiteConnection(path: source, create: false)
        try SQLiteSessionStore.checkSchema(store, allowingEmpty: false)
        // Made here, empty, readable by its owner only (sessions' ids are their credentials),
        // and only if nothing is there: so a failed copy can be removed without removing
        // anybody's file. `VACUUM INTO` writes into an empty file.
        let made = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard made >= 0 else {
            let reason = errno == EEXIST ? "it already exists; a backup never overwrites a file" : String(cString: strerror(errno))
            throw SessionStoreError(.unavailable, "cannot write the backup \(destination): \(reason)")
        }
        close(made)
        do throws(SessionStoreError) {
            let quoted = destination.replacingOccurrences(of: "'", with: "''")
            try store.execute("VACUUM INTO '\(quoted)'")
            let copy = try SQLiteConnection(path: destination, create: false)
            let check = try copy.statement("PRAGMA quick_check")
            defer { check.reset() }
            guard try check.next(), check.text(0) == "ok" else {
                throw SessionStoreError(.corrupt, "the copy at \(destination) did not pass SQLite's check: \(check.text(0))")
            }
            let count = try copy.statement("SELECT count(*) FROM sessions")
            defer { count.reset() }
            _ = try count.next()
            let size = ((try? FileManager.default.attributesOfItem(atPath: destination))?[.size] as? Int) ?? 0
            return Summary(sessions: Int(count.int64(0)), bytes: size)
        } catch {
            unlink(destination)
            throw error
        }
    }
}
