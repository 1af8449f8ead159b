import Locking

/// A ``SessionStore`` in the process's memory: what the durable stores keep, kept the same way,
/// but lost with the process. For tests of the hosting layer's recovery and passivation.
public final class InMemorySessionStore: SessionStore {
    private struct Session {
        var stored: StoredSession
        var pending: [UInt64: [UInt8]] = [:]
        /// Versions produced by each pending action.
        var produced: [UInt64: Int] = [:]
        /// Restarts that began to run each pending action again.
        var attempts: [UInt64: Int] = [:]
    }

    private let sessions = Locked<[String: Session]>([:])
    private let historyCapacity: Int

    /// An empty store keeping `historyCapacity` versions of each session (at least the latest).
    public init(historyCapacity: Int) {
        self.historyCapacity = max(1, historyCapacity)
    }

    public func commit(_ writes: [SessionWrite]) throws(SessionStoreError) -> Set<String> {
        sessions.withLock { sessions in
            var stale: Set<String> = []
            for write in writes {
                switch write {
                case .create(let id, let type, let state, let lastActivity, let publishingAhead, let creation):
                    sessions[id] = Session(
                        stored: StoredSession(
                            type: type, version: 0, state: state, startedThrough: 0, lastActivity: lastActivity,
                            history: [SessionBatch.Version(version: 0, producedBy: 0, state: state)], pendingActions: [],
                            publishedAhead: publishingAhead, creation: creation))
                case .accept(let id, let seq, let action, let key):
                    sessions[id]?.pending[seq] = action
                    sessions[id]?.attempts[seq] = nil
                    if let key, var session = sessions[id] {
                        session.stored.rememberedKeys.removeAll { $0.key == key.key || $0.seq + RememberedKey.window <= seq }
                        session.stored.rememberedKeys.append(key)
                        sessions[id] = session
                    }
                case .settle(let id, let seq):
                    sessions[id]?.pending[seq] = nil
                    sessions[id]?.produced[seq] = nil
                    sessions[id]?.attempts[seq] = nil
                case .attempt(let id, let seq):
                    if sessions[id]?.pending[seq] != nil { sessions[id]?.attempts[seq, default: 0] += 1 }
                case .version(let id, let version, let state, let startedThrough, let producedBy, let lastActivity):
                    guard var session = sessions[id] else { continue }
                    guard version > session.stored.version else {
                        stale.insert(id)
                        continue
                    }
                    session.stored.version = version
                    session.stored.state = state
                    session.stored.startedThrough = startedThrough
                    session.stored.lastActivity = max(session.stored.lastActivity, lastActivity)
                    session.stored.history.append(SessionBatch.Version(version: version, producedBy: producedBy, state: state))
                    session.stored.history.removeFirst(max(0, session.stored.history.count - historyCapacity))
                    if producedBy != 0 { session.produced[producedBy, default: 0] += 1 }
                    sessions[id] = session
                case .touch(let id, let lastActivity):
                    if let current = sessions[id]?.stored.lastActivity {
                        sessions[id]?.stored.lastActivity = max(current, lastActivity)
                    }
                case .delete(let id):
                    sessions[id] = nil
                case .release(let id):
                    sessions[id]?.stored.publishedAhead = false
                case .publishingAhead(let id):
                    sessions[id]?.stored.publishedAhead = true
                }
            }
            return stale
        }
    }

    public func load(id: String) throws(SessionStoreError) -> StoredSession? {
        sessions.withLock { sessions in
            guard let session = sessions[id] else { return nil }
            var stored = session.stored
            stored.pendingActions = session.pending.sorted { $0.key < $1.key }.map {
                PendingAction(
                    seq: $0.key, action: $0.value, producedVersions: session.produced[$0.key] ?? 0,
                    attempts: session.attempts[$0.key] ?? 0)
            }
            return stored
        }
    }

    public func contains(id: String) throws(SessionStoreError) -> Bool {
        sessions.withLock { $0[id] != nil }
    }

    public func count() throws(SessionStoreError) -> Int {
        sessions.withLock { $0.count }
    }

    public func count(owner: String) throws(SessionStoreError) -> Int {
        sessions.withLock { $0.values.count { $0.stored.owner?.hasSameBytes(as: owner) ?? false } }
    }

    public func deleteIdle(before cutoff: Int64, excluding: Set<String>) throws(SessionStoreError) -> [String] {
        sessions.withLock { sessions in
            let idle = sessions.filter { $0.value.stored.lastActivity < cutoff && !excluding.contains($0.key) }.map(\.key)
            for id in idle { sessions[id] = nil }
            return idle
        }
    }

    public func withdrawAttempts(_ attempts: [String: [UInt64]]) throws(SessionStoreError) {
        sessions.withLock { sessions in
            for (id, seqs) in attempts {
                for seq in seqs {
                    guard let counted = sessions[id]?.attempts[seq], counted > 0 else { continue }
                    sessions[id]?.attempts[seq] = counted - 1
                }
            }
        }
    }

    public func close() {}
}
