import ReactorHosting

/// An in-memory store that runs the test's hooks first: before each commit (which may refuse the
/// batch by throwing), each load (and on what it loaded) and each sweep of idle sessions. For
/// tests that must see, hold up, change or refuse what a host asks of its store.
final class HookedStore: SessionStore {
    private let store: InMemorySessionStore
    private let beforeCommit: @Sendable ([SessionWrite]) throws(SessionStoreError) -> Void
    private let beforeLoad: @Sendable () -> Void
    private let loaded: @Sendable (StoredSession?) -> StoredSession?
    private let beforeDeleteIdle: @Sendable () -> Void

    init(
        _ store: InMemorySessionStore,
        beforeCommit: @escaping @Sendable ([SessionWrite]) throws(SessionStoreError) -> Void = { _ in },
        beforeLoad: @escaping @Sendable () -> Void = {},
        loaded: @escaping @Sendable (StoredSession?) -> StoredSession? = { $0 },
        beforeDeleteIdle: @escaping @Sendable () -> Void = {}
    ) {
        self.store = store
        self.beforeCommit = beforeCommit
        self.beforeLoad = beforeLoad
        self.loaded = loaded
        self.beforeDeleteIdle = beforeDeleteIdle
    }

    func commit(_ writes: [SessionWrite]) throws(SessionStoreError) -> Set<String> {
        try beforeCommit(writes)
        return try store.commit(writes)
    }

    func load(id: String) throws(SessionStoreError) -> StoredSession? {
        beforeLoad()
        return loaded(try store.load(id: id))
    }

    func deleteIdle(before cutoff: Int64, excluding: Set<String>) throws(SessionStoreError) -> [String] {
        beforeDeleteIdle()
        return try store.deleteIdle(before: cutoff, excluding: excluding)
    }

    func contains(id: String) throws(SessionStoreError) -> Bool { try store.contains(id: id) }
    func count() throws(SessionStoreError) -> Int { try store.count() }
    func close() { store.close() }
}
