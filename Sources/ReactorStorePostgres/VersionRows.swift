import NIOCore
import PostgresNIO
import ReactorHosting

/// The sessions' new versions a batch writes (each session's row brought up to its last version
/// in the batch, with the batch's versions as one history chunk), and the history chunks they
/// push out of the bound, gathered so that they go to PostgreSQL as two statements over arrays
/// instead of two per session.
///
/// A session is in it once: a batch writes each session's versions where its last one stands
/// (``SessionBatch/versions(of:endingAt:)``), and the store sends what was gathered before a
/// session is deleted, which a new session of the same id may follow.
struct VersionRows {
    private(set) var ids: [String] = []
    private var versions: [Int64] = []
    private var states: [ByteBuffer] = []
    private var startedThrough: [Int64] = []
    private var lastActivity: [Int64] = []
    private var firstVersions: [Int64] = []
    private var chunks: [ByteBuffer] = []
    private var trimmedIDs: [String] = []
    private var trimmedThrough: [Int64] = []

    var isEmpty: Bool { ids.isEmpty }

    /// Brings session `id` up to its last version `version`, whose state is `state`, from any
    /// older one, with `entries` (the batch's versions of it) as a history chunk; then drops the
    /// session's chunks that end at `trimThrough` or before, if given.
    mutating func write(
        id: String, version: UInt64, state: [UInt8], startedThrough started: UInt64, lastActivity activity: Int64,
        entries: [SessionBatch.Version], trimThrough: UInt64?
    ) {
        ids.append(id)
        versions.append(Int64(bitPattern: version))
        states.append(ByteBuffer(bytes: state))
        startedThrough.append(Int64(bitPattern: started))
        lastActivity.append(activity)
        firstVersions.append(Int64(bitPattern: entries[0].version))
        chunks.append(ByteBuffer(bytes: HistoryChunk(entries: entries).encoded()))
        if let trimThrough {
            trimmedIDs.append(id)
            trimmedThrough.append(Int64(bitPattern: trimThrough))
        }
    }

    /// The statement that writes the rows: it returns the id of each session it moved forward.
    /// A row moves only from a version older than the batch's first of it, and its chunk is
    /// written only if it did.
    func rowsQuery() -> PostgresQuery {
        """
        WITH v AS (
            SELECT * FROM unnest(\(ids)::text[], \(versions)::bigint[], \(states)::bytea[], \(startedThrough)::bigint[],
                                 \(lastActivity)::bigint[], \(firstVersions)::bigint[], \(chunks)::bytea[])
                AS v(id, version, state, started_through, last_activity, first_version, versions)),
        moved AS (
            UPDATE reactor_sessions s SET version = v.version, state = v.state, started_through = v.started_through,
                last_activity = greatest(s.last_activity, v.last_activity)
            FROM v WHERE s.id = v.id AND s.version < v.first_version RETURNING s.id),
        chunks AS (
            INSERT INTO reactor_history(id, first_version, last_version, versions)
            SELECT v.id, v.first_version, v.version, v.versions FROM v JOIN moved ON moved.id = v.id
            ON CONFLICT (id, first_version) DO UPDATE SET last_version = EXCLUDED.last_version, versions = EXCLUDED.versions)
        SELECT id FROM moved
        """
    }

    /// The statement that drops the chunks pushed out of the history's bound; nil when none is.
    func trimQuery() -> PostgresQuery? {
        guard !trimmedIDs.isEmpty else { return nil }
        return """
            DELETE FROM reactor_history h USING unnest(\(trimmedIDs)::text[], \(trimmedThrough)::bigint[]) AS t(id, through)
            WHERE h.id = t.id AND h.last_version <= t.through
            """
    }
}
