import ReactorHosting

/// Sessions written into a store as a server writes them, covering what a copy to another store
/// must carry: histories, actions accepted and not yet settled (some with an attempt to run them
/// again counted), remembered idempotency keys, and sessions marked as served ahead of the store.
public enum SampleSessions {
    /// The subjects that created sessions (their owners).
    public static let subjects = ["alice", "bob", "carol"]

    /// How many sessions each subject owns among the first `count` written.
    public static func owned(of count: Int) -> [String: Int] {
        var owned: [String: Int] = [:]
        for index in 0..<count where index % 4 == 1 { owned[subjects[index % subjects.count], default: 0] += 1 }
        return owned
    }

    /// Writes `count` sessions into `store` in one commit and returns their ids, in the order
    /// written. Session `i` has `i % 6` versions after its first; when it has any, its last
    /// action is still pending, every action carries an idempotency key, and every third session
    /// is marked ``StoredSession/publishedAhead``; every fifth, from the third, had an attempt to run
    /// its pending action again counted (``PendingAction/attempts``); every fourth, from the second, was created with
    /// parameters and a creation context (``StoredSession/creation``) by one of ``subjects``.
    public static func write(_ count: Int, into store: any SessionStore) throws -> [String] {
        var writes: [SessionWrite] = []
        var ids: [String] = []
        for index in 0..<count {
            let id = InstanceID.make()
            ids.append(id)
            let creation =
                index % 4 == 1
                ? InstanceCreation(
                    parameters: Array(#"{"session":\#(index)}"#.utf8),
                    context: CreationContext(
                        idempotencyKey: "create-\(index)", remoteAddress: "127.0.0.1", subject: subjects[index % subjects.count])
                ).json
                : nil
            writes.append(
                .create(
                    id: id, type: index % 2 == 0 ? "counter" : "todo", state: state(index, 0),
                    lastActivity: 1_000 + Int64(index), creation: creation))
            let versions = UInt64(index % 6)
            for version in UInt64(1)...max(1, versions) where versions > 0 {
                let action = Array("\"step\(version)\"".utf8)
                writes.append(
                    .accept(
                        id: id, seq: version, action: action,
                        key: RememberedKey(
                            key: "key-\(index)-\(version)", seq: version,
                            digest: RememberedKey.digest(of: action))))
                writes.append(
                    .version(
                        id: id, version: version, state: state(index, version), startedThrough: version,
                        producedBy: version, lastActivity: 2_000 + Int64(index)))
                if version < versions { writes.append(.settle(id: id, seq: version)) }
            }
            if index % 5 == 2 { writes.append(.attempt(id: id, seq: versions)) }
            if index % 3 == 0 { writes.append(.publishingAhead(id: id)) }
        }
        _ = try store.commit(writes)
        return ids
    }

    /// The state of session `index` at `version`, distinct for each.
    private static func state(_ index: Int, _ version: UInt64) -> [UInt8] {
        Array(#"{"session":\#(index),"value":\#(version)}"#.utf8)
    }
}
