import CSQLite
import Foundation
import ReactorHosting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

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
    package static func copy(
        from source: String, to destination: String,
        beforePublishing: () throws(SessionStoreError) -> Void
    ) throws(SessionStoreError) -> Summary {
        let store = try StoreFileCopy.openStore(source)
        if StoreFileCopy.exists(destination) { throw alreadyExists(destination) }
        // As copy, restore and serve do: the directory is made when missing.
        try SQLiteSessionStore.makeDirectory(of: destination)
        let partial = "\(destination).partial-\(getpid())"
        let sessions = try StoreFileCopy.write(store, to: partial)
        do throws(SessionStoreError) {
            try beforePublishing()
            try StoreFileCopy.publish(
                partial, as: destination, naming: "the backup \(destination)",
                taken: alreadyExists(destination))
            try StoreFileCopy.syncDirectory(of: destination)
            return Summary(sessions: sessions, bytes: size(of: destination))
        } catch {
            unlink(partial)
            throw error
        }
    }

    /// Copies every session `source` holds (a snapshot of a store that other processes serve,
    /// such as a PostgreSQL database) into a new backup file at `destination`, written as
    /// ``copy(from:to:)`` writes one: never over a file, checked and synced before it takes its name.
    /// - Throws: ``SessionStoreError`` saying what failed; nothing is left at `destination` then.
    public static func copy(from source: any SessionExporting, to destination: String) throws(SessionStoreError) -> Summary {
        let copied = try SessionCopy.copy(from: source, into: try SQLiteSessionImport(path: destination), whileServed: true)
        return Summary(sessions: copied.sessions, bytes: size(of: destination))
    }

    /// The size in bytes of the backup at `path` (0 if it cannot be read).
    private static func size(of path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    private static func alreadyExists(_ destination: String) -> SessionStoreError {
        SessionStoreError(.unavailable, "cannot write the backup \(destination): it already exists; a backup never overwrites a file")
    }
}
