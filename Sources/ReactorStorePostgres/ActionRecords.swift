import NIOCore
import PostgresNIO

/// The records of accepted actions a batch writes and those of settled actions it deletes,
/// gathered so that each kind goes to PostgreSQL as one statement over arrays instead of one
/// statement per action.
///
/// An action accepted and settled in the same batch is in neither (``SessionBatch`` leaves both
/// out). One settled and then accepted again under the same sequence is in both: the deletion
/// goes first.
struct ActionRecords {
    /// Accepted actions, in order, each once: should one action's record be queued twice, the
    /// last is kept, as one `INSERT … ON CONFLICT` may not touch a row twice.
    private var accepted: [Key: Int] = [:]
    private var acceptedIDs: [String] = []
    private var acceptedSeqs: [Int64] = []
    private var actions: [ByteBuffer] = []
    private var settledIDs: [String] = []
    private var settledSeqs: [Int64] = []

    private struct Key: Hashable {
        let id: String
        let seq: UInt64
    }

    /// Keeps the record of action `seq` of session `id`.
    mutating func accept(id: String, seq: UInt64, action: [UInt8]) {
        if let index = accepted[Key(id: id, seq: seq)] {
            actions[index] = ByteBuffer(bytes: action)
            return
        }
        accepted[Key(id: id, seq: seq)] = actions.count
        acceptedIDs.append(id)
        acceptedSeqs.append(Int64(bitPattern: seq))
        actions.append(ByteBuffer(bytes: action))
    }

    /// Deletes the record of action `seq` of session `id`.
    mutating func settle(id: String, seq: UInt64) {
        settledIDs.append(id)
        settledSeqs.append(Int64(bitPattern: seq))
    }

    /// The statements that write what was gathered: none when nothing was.
    func queries() -> [PostgresQuery] {
        var queries: [PostgresQuery] = []
        if !settledIDs.isEmpty {
            queries.append(
                """
                DELETE FROM reactor_actions a USING unnest(\(settledIDs)::text[], \(settledSeqs)::bigint[]) AS s(id, seq)
                WHERE a.id = s.id AND a.seq = s.seq
                """)
        }
        if !acceptedIDs.isEmpty {
            queries.append(
                """
                INSERT INTO reactor_actions(id, seq, action)
                SELECT * FROM unnest(\(acceptedIDs)::text[], \(acceptedSeqs)::bigint[], \(actions)::bytea[])
                ON CONFLICT (id, seq) DO UPDATE SET action = EXCLUDED.action, attempts = 0
                """)
        }
        return queries
    }
}
