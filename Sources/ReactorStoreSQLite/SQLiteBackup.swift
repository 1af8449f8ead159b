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
    ///
    /// The copy is written beside `destination` under a name of its own
    /// (`destination.partial-PID`), checked and synced to disk, and only then linked into place:
    /// a backup cut off (killed, a full disk) never leaves a file under `destination`, and one
    /// that finished survives a power loss.
    /// - Throws: ``SessionStoreError`` naming the file and what is wrong.
    public static func copy(from source: String, to destination: String) throws(SessionStoreError) -> Summary {
        try copy(from: source, to: destination, beforePublishing: {})
    }

    /// ``copy(from:to:)``, calling `beforePublishing` once the checked copy is on disk and before
    /// it takes `destination`'s name; what it throws abandons the backup.
    package static func copy(from source: String, to destination: String,
                             beforePublishing: () throws(SessionStoreError) -> Void) throws(SessionStoreError) -> Summary {
        guard FileManager.default.fileExists(atPath: source) else {
            throw SessionStoreError(.unavailable, "there is no session store at \(source)")
        }
        let store = try SQLiteConnection(path: source, create: false)
        try SQLiteSessionStore.checkSchema(store, allowingEmpty: false)
        var status = stat()
        if lstat(destination, &status) == 0 { throw alreadyExists(destination) }
        // Made here, empty, readable by its owner only (sessions' ids are their credentials),
        // and only if nothing is there: so a failed copy can be removed without removing
        // anybody's file. `VACUUM INTO` writes into an empty file.
        let partial = "\(destination).partial-\(getpid())"
        let made = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard made >= 0 else {
            throw SessionStoreError(.unavailable, "cannot write the backup \(partial): \(String(cString: strerror(errno)))")
        }
        close(made)
        do throws(SessionStoreError) {
            let quoted = partial.replacingOccurrences(of: "'", with: "''")
            try store.execute("VACUUM INTO '\(quoted)'")
            let sessions = try check(partial)
            // `VACUUM INTO` does not sync what it wrote.
            try sync(partial)
            try beforePublishing()
            // A link, unlike a rename, refuses a name that is taken, so a file made there while
            // the copy ran is left alone too.
            guard link(partial, destination) == 0 else {
                if errno == EEXIST { throw alreadyExists(destination) }
                throw SessionStoreError(.unavailable, "cannot write the backup \(destination): \(String(cString: strerror(errno)))")
            }
            unlink(partial)
            try sync(URL(fileURLWithPath: destination).deletingLastPathComponent().path)
            let size = ((try? FileManager.default.attributesOfItem(atPath: destination))?[.size] as? Int) ?? 0
            return Summary(sessions: sessions, bytes: size)
        } catch {
            unlink(partial)
            throw error
        }
    }

    /// Runs SQLite's quick check on the copy at `path`; returns how many sessions it holds.
    private static func check(_ path: String) throws(SessionStoreError) -> Int {
        let copy = try SQLiteConnection(path: path, create: false)
        let check = try copy.statement("PRAGMA quick_check")
        defer { check.reset() }
        guard try check.next(), check.text(0) == "ok" else {
            throw SessionStoreError(.corrupt, "the copy at \(path) did not pass SQLite's check: \(check.text(0))")
        }
        let count = try copy.statement("SELECT count(*) FROM sessions")
        defer { count.reset() }
        _ = try count.next()
        return Int(count.int64(0))
    }

    /// Syncs the file or directory at `path` to disk.
    private static func sync(_ path: String) throws(SessionStoreError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0, fsync(descriptor) == 0 else {
            let reason = String(cString: strerror(errno))
            if descriptor >= 0 { close(descriptor) }
            throw SessionStoreError(.unavailable, "cannot sync the backup at \(path) to disk: \(reason)")
        }
        close(descriptor)
    }

    private static func alreadyExists(_ destination: String) -> SessionStoreError {
        SessionStoreError(.unavailable, "cannot write the backup \(destination): it already exists; a backup never overwrites a file")
    }
}
