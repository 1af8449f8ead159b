import Foundation
import ReactorHosting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Puts a backup in a session store's place, while no server serves the store.
///
/// Nothing is deleted or overwritten: the store it replaces is kept beside it, under
/// `PATH.before-restore-TIMESTAMP`, with its write-ahead log. The order of the steps means a
/// restore cut off at any point leaves at `PATH` either the old store, whole, or the backup:
///
/// 1. the store's lock is taken, so a running server refuses the restore (``StoreFileLock``);
/// 2. the backup is opened as a session store and copied, checked and synced beside the store,
///    under a name of its own;
/// 3. the old store's write-ahead log is folded into it, when it can be (a damaged store may
///    not allow it), and the old files are linked or moved aside;
/// 4. the copy takes the store's name in one rename, and the directory is synced.
///
/// Copying the backup's file by hand instead risks a stale write-ahead log beside it being
/// replayed onto it.
///
/// Sessions the backup holds at earlier versions than the store it replaces go back to those
/// states, but their version numbers go on past the ones the replaced store reached
/// (``StoredSession/shownThrough``): a client that saw a later version is never shown that
/// number again with another state.
public enum SQLiteRestore {
    /// What a restore did.
    public struct Summary: Sendable, Equatable {
        /// Sessions in the restored store.
        public var sessions: Int
        /// Where the store it replaced is kept; nil when there was none.
        public var keptAside: String?
        /// How many of them the replaced store held at later versions; nil when there was no
        /// store to replace, or it could not be read (then clients that saw its later versions
        /// are told, on resuming, that the instance went back).
        public var wentBack: Int?
    }

    /// Restores the backup at `backup` into the store at `store`.
    /// - Parameter now: the time named in the kept store's file name.
    /// - Throws: ``SessionStoreError`` naming the file and what is wrong; nothing changed then.
    public static func restore(from backup: String, to store: String, now: Date = Date()) throws(SessionStoreError) -> Summary {
        // Through any symbolic link.
        guard StoreFileLock.realPath(backup) != StoreFileLock.realPath(store) else {
            throw SessionStoreError(.unavailable, "\(backup) is the store itself; restore from a backup of it")
        }
        let source = try StoreFileCopy.openStore(backup)
        try refuseAnotherApplications(store)
        try SQLiteSessionStore.makeDirectory(of: store)
        let lock = try StoreFileLock(storePath: store)
        defer { lock.release() }
        let incoming = "\(store).restoring-\(getpid())"
        var wentBack: Int?
        let sessions = try StoreFileCopy.write(source, to: incoming) { copy throws(SessionStoreError) in
            wentBack = try carryVersionsShown(from: store, to: copy)
        }
        do throws(SessionStoreError) {
            let aside = try keepAside(store, now: now)
            guard rename(incoming, store) == 0 else {
                throw SessionStoreError(.unavailable, "cannot put the backup in place of \(store): \(String(cString: strerror(errno)))")
            }
            try StoreFileCopy.syncDirectory(of: store)
            return Summary(sessions: sessions, keptAside: aside, wentBack: wentBack)
        } catch {
            unlink(incoming)
            throw error
        }
    }

    /// Refuses to replace a readable SQLite database that is not a session store (another
    /// application's, which every other command refuses too) or that a newer build wrote. A
    /// store that cannot be read at all is replaced (kept aside): mending a damaged store is what
    /// a restore is often for.
    private static func refuseAnotherApplications(_ store: String) throws(SessionStoreError) {
        guard StoreFileCopy.exists(store), let replaced = try? SQLiteConnection(path: store, create: false, readOnly: true) else {
            return
        }
        guard let tables = try? SQLiteSchema.tableCount(replaced), tables > 0 else { return }
        if let refusal = try? SQLiteSchema.refusal(of: replaced) {
            throw SessionStoreError(.corrupt, "nothing was restored: \(refusal)")
        }
    }

    /// Marks each session of `copy` that the store at `store` holds at a later version with the
    /// highest version that store may have shown of it (``StoredSession/shownThrough``).
    /// - Returns: how many it marked; nil when there is no store or it cannot be read (a damaged
    ///   store is what a restore is often for), which leaves the copy as it was.
    private static func carryVersionsShown(from store: String, to copy: SQLiteConnection) throws(SessionStoreError) -> Int? {
        guard StoreFileCopy.exists(store) else { return nil }
        var shown: [(id: String, version: UInt64)] = []
        do throws(SessionStoreError) {
            let replaced = try StoreFileCopy.openStore(store, readOnly: true)
            let aheadLimit = GroupCommitter.versionsShownAheadLimit
            // A store an older build wrote may lack the later columns.
            let publishedAhead =
                try SQLiteSchema.hasColumn("published_ahead", of: "sessions", on: replaced)
                ? "published_ahead" : "0"
            let shownThrough =
                try SQLiteSchema.hasColumn("shown_through", of: "sessions", on: replaced)
                ? "shown_through" : "0"
            let journaled = try journaledVersions(on: replaced)
            let sessions = try replaced.statement(
                "SELECT id, version, \(publishedAhead) <> 0, \(shownThrough) FROM sessions")
            defer { sessions.reset() }
            while try sessions.next() {
                let id = sessions.text(0)
                let newest = max(sessions.uint64(1), journaled[id] ?? 0)
                    .addingReportingOverflow(sessions.int64(2) != 0 ? aheadLimit : 0)
                // Saturating: a version near the limit (a hand-edited store) marks its session as far as it goes.
                shown.append((id, max(newest.overflow ? .max : newest.partialValue, sessions.uint64(3))))
            }
        } catch {
            return nil
        }
        try copy.execute("BEGIN IMMEDIATE")
        do throws(SessionStoreError) {
            // A backup an older build took may lack the column.
            try SQLiteSchema.addColumnsOfLaterBuilds(copy)
            // The backup's own newest version of a session may also be in a journal row not yet
            // folded into its row: a session is marked only when that is behind too.
            let journaled = try journaledVersions(on: copy)
            let mark = try copy.statement(
                "UPDATE sessions SET shown_through = ?1 WHERE id = ?2 AND max(version, ?3) < ?1 AND shown_through < ?1")
            var marked = 0
            for (id, version) in shown {
                mark.reset()
                mark.bind(1, version)
                mark.bind(2, id)
                mark.bind(3, journaled[id] ?? 0)
                try mark.run()
                marked += mark.changes > 0 ? 1 : 0
            }
            mark.reset()
            try copy.execute("COMMIT")
            return marked
        } catch {
            try? copy.execute("ROLLBACK")
            throw error
        }
    }

    /// The newest version of each session in the journal rows of the database on `connection`
    /// not yet folded into its `sessions` row (they may be newer than that row); empty when it
    /// has no journal (an older build's).
    private static func journaledVersions(on connection: SQLiteConnection) throws(SessionStoreError) -> [String: UInt64] {
        guard try SQLiteSchema.hasTable("journal", on: connection) else { return [:] }
        let rows = try connection.statement("SELECT id, max(last_version) FROM journal GROUP BY id")
        defer { rows.reset() }
        var versions: [String: UInt64] = [:]
        while try rows.next() { versions[rows.text(0)] = rows.uint64(1) }
        return versions
    }

    /// `date` as the names of what a restore keeps aside carry it: `20261126T051500Z`.
    public static func stamp(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return formatter.string(from: date)
    }

    /// Folds the old store's write-ahead log into it when it can, then gives its files a second
    /// name beside it: the database is linked (it keeps its name until the backup takes it), its
    /// log and shared-memory index are moved, so they cannot be replayed onto the backup.
    /// - Returns: the kept database's path, or nil when there is no store.
    private static func keepAside(_ store: String, now: Date) throws(SessionStoreError) -> String? {
        guard StoreFileCopy.exists(store) else { return nil }
        if let old = try? SQLiteConnection(path: store, create: false) {
            try? old.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        let aside = "\(store).before-restore-\(stamp(now))"
        guard link(store, aside) == 0 else {
            let reason = errno == EEXIST ? "\(aside) already exists" : String(cString: strerror(errno))
            throw SessionStoreError(.unavailable, "cannot keep the store \(store) aside: \(reason)")
        }
        for suffix in ["-wal", "-shm"] where StoreFileCopy.exists(store + suffix) {
            guard rename(store + suffix, aside + suffix) == 0 else {
                throw SessionStoreError(.unavailable, "cannot keep \(store + suffix) aside: \(String(cString: strerror(errno)))")
            }
        }
        return aside
    }
}
