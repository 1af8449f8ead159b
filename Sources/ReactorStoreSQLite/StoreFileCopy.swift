import Foundation
import ReactorHosting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A whole, checked copy of a session store in a file of its own, as backups and restores write
/// them: opened as the session store it must be, copied with `VACUUM INTO` (one read
/// transaction, compacted, write-ahead log included), checked, and synced to disk.
enum StoreFileCopy {
    /// Opens the store at `source` (only to read it when `readOnly`), refusing a missing file or
    /// one that is not a session store.
    static func openStore(_ source: String, readOnly: Bool = false) throws(SessionStoreError) -> SQLiteConnection {
        try SQLiteSessionStore.refuseDirectory(source)
        guard FileManager.default.fileExists(atPath: source) else {
            throw SessionStoreError(.unavailable, "there is no session store at \(source)")
        }
        let store = try SQLiteConnection(path: source, create: false, readOnly: readOnly)
        try SQLiteSchema.check(store, allowingEmpty: false)
        return store
    }

    /// Copies `store` to `destination`, a new file, readable by its owner only (sessions' ids are
    /// their credentials); has `prepare` change the copy, if given; checks and syncs the copy. The
    /// file is made here, and only if nothing is there, so a failed copy is removed without
    /// removing anybody's file.
    /// - Returns: how many sessions the copy holds.
    static func write(
        _ store: SQLiteConnection, to destination: String,
        preparing prepare: ((SQLiteConnection) throws(SessionStoreError) -> Void)? = nil
    ) throws(SessionStoreError) -> Int {
        let made = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard made >= 0 else {
            throw SessionStoreError(.unavailable, "cannot write \(destination): \(String(cString: strerror(errno)))")
        }
        close(made)
        do throws(SessionStoreError) {
            // `VACUUM INTO` writes into an empty file.
            let quoted = destination.replacingOccurrences(of: "'", with: "''")
            do {
                try store.execute("VACUUM INTO '\(quoted)'")
            } catch  where error.kind == .full {
                // SQLite names the connection's file, the store, which is only read here.
                throw SessionStoreError(.full, "cannot write \(destination): its disk is full; \(store.path) is left as it was")
            }
            if let prepare {
                // Closed before the check: whatever it wrote is in the file then.
                try prepare(try SQLiteConnection(path: destination, create: false))
            }
            let sessions = try check(destination)
            // `VACUUM INTO` does not sync what it wrote.
            try sync(destination)
            return sessions
        } catch {
            unlink(destination)
            throw error
        }
    }

    /// Runs SQLite's quick check on the copy at `path`; returns how many sessions it holds.
    static func check(_ path: String) throws(SessionStoreError) -> Int {
        let copy = try SQLiteConnection(path: path, create: false)
        let check = try copy.statement("PRAGMA quick_check")
        defer { check.reset() }
        guard try check.next(), check.text(0) == "ok" else {
            throw SessionStoreError(.corrupt, "the copy at \(path) did not pass SQLite's check: \(check.text(0))")
        }
        return try SQLiteSessionStore.countSessions(on: copy)
    }

    /// Gives the checked, synced copy at `partial` the name `destination` and drops its partial
    /// name. A link, unlike a rename, refuses a name that is taken, so a file made there
    /// meanwhile is left alone: `taken` is thrown then; `what` names the destination in other
    /// failures. The caller syncs the directory.
    static func publish(
        _ partial: String, as destination: String, naming what: String,
        taken: @autoclosure () -> SessionStoreError
    ) throws(SessionStoreError) {
        guard link(partial, destination) == 0 else {
            if errno == EEXIST { throw taken() }
            throw SessionStoreError(.unavailable, "cannot write \(what): \(String(cString: strerror(errno)))")
        }
        unlink(partial)
    }

    /// Removes a store this process made at `path`, with the files SQLite and the store's lock
    /// keep beside it.
    static func removeStore(at path: String) {
        for suffix in ["", "-wal", "-shm", ".lock"] { unlink(path + suffix) }
    }

    /// Syncs the file or directory at `path` to disk.
    static func sync(_ path: String) throws(SessionStoreError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0, fsync(descriptor) == 0 else {
            let reason = String(cString: strerror(errno))
            if descriptor >= 0 { close(descriptor) }
            throw SessionStoreError(.unavailable, "cannot sync \(path) to disk: \(reason)")
        }
        close(descriptor)
    }

    /// Syncs the directory holding `path`, so a name given there survives a power loss.
    static func syncDirectory(of path: String) throws(SessionStoreError) {
        try sync(URL(fileURLWithPath: path).deletingLastPathComponent().path)
    }

    /// Whether anything (a file, a link, a directory) has this name.
    static func exists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }
}
