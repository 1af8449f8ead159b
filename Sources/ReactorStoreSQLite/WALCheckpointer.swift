import CSQLite
import Dispatch
import Locking
import ReactorHosting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Copies the write-ahead log into the database on a thread and connection of its own, beside
/// the commits, so that no commit waits while a checkpoint copies pages and syncs the database.
///
/// SQLite's automatic checkpoint runs inside the commit that fills the log past 1,000 pages: that
/// commit, and every action queued behind it, waits 2–2.5 ms. Here the writer turns it off and
/// tells this thread every ``framesPerPass`` pages it commits; the thread runs a passive
/// checkpoint, which never blocks the writer. A log that keeps growing is never started over,
/// though (a passive checkpoint ends behind the last commit), so once it reaches
/// ``framesBeforeRestart`` the writer checkpoints itself: little is left to copy by then, and when
/// it has copied all of it the next commit starts the log over.
final class WALCheckpointer: Sendable {
    /// Pages committed between two passes of the thread.
    static let framesPerPass = 256
    /// Pages in the log at which the writer finishes a checkpoint itself.
    static let framesBeforeRestart = 2_000

    private struct State {
        var isStopping = false
        /// Pages committed since the log last started over, and at the last pass asked for.
        var frames = 0
        var framesAtLastPass = 0
    }

    private let connection: Locked<SQLiteConnection>
    private let state = Locked(State())
    private let wake = DispatchSemaphore(value: 0)
    private let thread: Locked<pthread_t?>

    /// Opens a connection of its own to the database at `path` and starts the thread.
    init(path: String) throws(SessionStoreError) {
        let connection = try SQLiteConnection(path: path, create: false)
        try connection.execute("PRAGMA synchronous=FULL")
        self.connection = Locked(connection)
        thread = Locked(nil)
        var error: Int32 = 0
        guard let started = startThread(named: "rs-checkpoint", { [self] in run() }, error: &error) else {
            throw SessionStoreError(.unavailable, "could not start the session store's checkpoint thread (error \(error))")
        }
        thread.withLock { $0 = started }
    }

    /// Called by the writer after each commit with the pages it wrote (the log's new frames).
    /// - Returns: whether the writer should checkpoint now, so that the log can start over.
    func committed(frames: Int) -> Bool {
        let (pass, restart) = state.withLock { state -> (Bool, Bool) in
            state.frames += frames
            let pass = state.frames - state.framesAtLastPass >= Self.framesPerPass
            if pass { state.framesAtLastPass = state.frames }
            return (pass, state.frames >= Self.framesBeforeRestart)
        }
        if pass { wake.signal() }
        return restart
    }

    /// Runs the writer's own checkpoint on `writer` (see the type's description).
    func finish(on writer: SQLiteConnection) {
        if Self.checkpointPassively(writer) {
            state.withLock { state in
                state.frames = 0
                state.framesAtLastPass = 0
            }
        }
    }

    /// Ends the thread, after the pass it may be running. Returns once it has.
    func stop() {
        state.withLock { $0.isStopping = true }
        wake.signal()
        if let running = thread.withLock({ thread -> pthread_t? in
            defer { thread = nil }
            return thread
        }) {
            pthread_join(running, nil)
        }
    }

    private func run() {
        while true {
            wake.wait()
            if state.withLock({ $0.isStopping }) { return }
            // Busy (the writer checkpointing itself) or failing (a full disk): the next pass, or
            // the writer's own checkpoint, takes it again.
            connection.withLock { _ = Self.checkpointPassively($0) }
        }
    }

    /// Copies what it can of the log into the database without waiting for the writer.
    /// - Returns: whether it copied the whole log (the next commit then starts it over).
    private static func checkpointPassively(_ connection: SQLiteConnection) -> Bool {
        var logFrames: Int32 = 0
        var copied: Int32 = 0
        let status = sqlite3_wal_checkpoint_v2(connection.handle, nil, SQLITE_CHECKPOINT_PASSIVE, &logFrames, &copied)
        return status == SQLITE_OK && copied == logFrames
    }
}
