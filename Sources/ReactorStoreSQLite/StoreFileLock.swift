import Foundation
import Locking
import ReactorHosting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Keeps a SQLite session store to one server at a time.
///
/// Two servers on one file would each hold instances of the same sessions and overwrite each
/// other's versions (and the store's folding of its journal assumes one writer). The store takes
/// an exclusive `flock` on a file beside it, `PATH.lock`, before SQLite opens the file (only a
/// look at its first bytes comes earlier), and holds it while it is open. The kernel lets go of it when the process ends, however it ends, so
/// a crash never leaves the store locked. The file holds the holder's process id, for the message
/// a second server gets. Backups do not take it: they only read.
///
/// `PATH` is the store's real path, its symbolic links followed, so that a link to the store
/// finds the lock its target's server holds. A hard link is another name for the same file with
/// no way back to the first, so the store also takes an exclusive `flock` on its database file,
/// when that exists already: on the file itself, whatever name opened it. (SQLite's own locks
/// are `fcntl` locks, which `flock` does not touch.)
final class StoreFileLock: Sendable {
    /// The lock file.
    let path: String
    /// The lock file's descriptor and the database file's (-1 when it did not exist yet), while
    /// held; both -1 once let go.
    private let descriptors: Locked<(lock: Int32, database: Int32)>

    /// Takes the lock of the store at `storePath`, or throws naming who holds it.
    /// - Parameter creating: whether to create the database file when it is not there, empty,
    ///   and readable and writable by its owner only (its ids are the sessions' credentials;
    ///   SQLite gives its log and index files the database's permissions), so that it is locked
    ///   from the start.
    init(storePath: String, creating: Bool = false) throws(SessionStoreError) {
        let database = Self.realPath(storePath)
        path = database + ".lock"
        let opened = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard opened >= 0 else {
            throw SessionStoreError(
                .unavailable,
                "cannot open the session store \(storePath): cannot create its lock file \(path): \(String(cString: strerror(errno)))")
        }
        var file: Int32 = -1
        do throws(SessionStoreError) {
            try Self.lock(opened, of: storePath, through: path) { Self.holder(opened).map { " (pid \($0))" } ?? "" }
            // Read-only is enough for flock, and a store that does not exist yet has no other name.
            file = open(database, O_RDONLY | O_CLOEXEC | (creating ? O_CREAT : 0), 0o600)
            if file < 0 && creating {
                throw SessionStoreError(.unavailable, "cannot create the session store \(storePath): \(String(cString: strerror(errno)))")
            }
            if file >= 0 {
                try Self.lock(file, of: storePath, through: database) { ", which opened it under another name (a hard link)" }
            }
        } catch {
            if file >= 0 { close(file) }
            flock(opened, LOCK_UN)
            close(opened)
            throw error
        }
        let text = Array("\(getpid())\n".utf8)
        _ = ftruncate(opened, 0)
        _ = text.withUnsafeBytes { pwrite(opened, $0.baseAddress, $0.count, 0) }
        descriptors = Locked((opened, file))
    }

    /// Lets go of the lock (once; later calls do nothing).
    ///
    /// Unlocked before the descriptor is closed: a process this one is starting meanwhile (a
    /// test runner spawning servers, an application embedding the store) holds a copy of the
    /// descriptor until it executes its program, and a close alone would leave the lock held
    /// through that copy.
    func release() {
        descriptors.withLock { descriptors in
            for descriptor in [descriptors.database, descriptors.lock] where descriptor >= 0 {
                flock(descriptor, LOCK_UN)
                close(descriptor)
            }
            descriptors = (-1, -1)
        }
    }

    deinit { release() }

    /// Takes an exclusive `flock` on `descriptor` (the file `lockPath`), or throws: `holder`
    /// tells who has it, for the message.
    private static func lock(
        _ descriptor: Int32, of storePath: String, through lockPath: String, holder: () -> String
    ) throws(SessionStoreError) {
        guard flock(descriptor, LOCK_EX | LOCK_NB) != 0 else { return }
        let reason = errno
        guard reason == EWOULDBLOCK else {
            throw SessionStoreError(
                .unavailable, "cannot lock the session store \(storePath) (\(lockPath)): \(String(cString: strerror(reason)))")
        }
        throw SessionStoreError(
            .unavailable,
            "the session store \(storePath) is in use by another process\(holder()), and one process at a time may use it (two servers would overwrite each other's sessions): stop that one first"
        )
    }

    /// `path` with its symbolic links followed; for a file not there yet, its directory's real
    /// path and its name (`path` itself when even the directory is not there yet).
    static func realPath(_ path: String) -> String {
        if let real = realpath(path, nil) {
            defer { free(real) }
            return String(cString: real)
        }
        let url = URL(fileURLWithPath: path)
        guard let directory = realpath(url.deletingLastPathComponent().path, nil) else { return path }
        defer { free(directory) }
        return URL(fileURLWithPath: String(cString: directory)).appendingPathComponent(url.lastPathComponent).path
    }

    /// The process id written in the lock file, if it reads as one.
    private static func holder(_ descriptor: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 16)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return Int32(String(decoding: buffer[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
