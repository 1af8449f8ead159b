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
final class StoreFileLock: Sendable {
    /// The lock file.
    let path: String
    /// Its descriptor while held; -1 once let go.
    private let descriptor: Locked<Int32>

    /// Takes the lock of the store at `storePath`, or throws naming who holds it.
    init(storePath: String) throws(SessionStoreError) {
        path = storePath + ".lock"
        let opened = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard opened >= 0 else {
            throw SessionStoreError(
                .unavailable,
                "cannot open the session store \(storePath): cannot create its lock file \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(opened, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno
            let holder = Self.holder(opened)
            close(opened)
            guard reason == EWOULDBLOCK else {
                throw SessionStoreError(
                    .unavailable, "cannot lock the session store \(storePath) (\(path)): \(String(cString: strerror(reason)))")
            }
            throw SessionStoreError(
                .unavailable,
                "the session store \(storePath) is in use by another process\(holder.map { " (pid \($0))" } ?? ""), and one process at a time may use it (two servers would overwrite each other's sessions): stop that one first"
            )
        }
        let text = Array("\(getpid())\n".utf8)
        _ = ftruncate(opened, 0)
        _ = text.withUnsafeBytes { pwrite(opened, $0.baseAddress, $0.count, 0) }
        descriptor = Locked(opened)
    }

    /// Lets go of the lock (once; later calls do nothing).
    ///
    /// Unlocked before the descriptor is closed: a process this one is starting meanwhile (a
    /// test runner spawning servers, an application embedding the store) holds a copy of the
    /// descriptor until it executes its program, and a close alone would leave the lock held
    /// through that copy.
    func release() {
        descriptor.withLock { descriptor in
            guard descriptor >= 0 else { return }
            flock(descriptor, LOCK_UN)
            close(descriptor)
            descriptor = -1
        }
    }

    deinit { release() }

    /// The process id written in the lock file, if it reads as one.
    private static func holder(_ descriptor: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 16)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return Int32(String(decoding: buffer[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
