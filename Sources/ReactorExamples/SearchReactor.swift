import ReactorCore

/// A search over a bundled list of Swift package names, after ReactorKit's GitHubSearch
/// example: results arrive after an injected latency, page by page, and a newer query cancels
/// the one in flight (the latest query wins).
public final class SearchReactor: Reactor {
    /// What the user can do.
    public enum Action: Codable, Sendable, Equatable {
        case updateQuery(query: String)
        case loadNextPage
    }

    /// How the state changes.
    public enum Mutation: Sendable, Equatable {
        case setQuery(String)
        case setResults([String], nextPage: Int?)
        case appendResults([String], nextPage: Int?)
        case setLoadingNextPage(Bool)
    }

    /// What the user sees.
    public struct State: Codable, Sendable, Equatable {
        /// The latest query.
        public var query = ""
        /// The names matching `query`, pages loaded so far.
        public var results: [String] = []
        /// The page `loadNextPage` would load, or `nil` when there is none.
        public var nextPage: Int?
        /// True while the next page is on its way.
        public var isLoadingNextPage = false

        /// No query, no results.
        public init() {}

        private enum CodingKeys: String, CodingKey {
            case query, results, nextPage, isLoadingNextPage
        }

        /// Encodes every key, `nextPage` as `null` when there is none, so the keys are stable.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(query, forKey: .query)
            try container.encode(results, forKey: .results)
            try container.encode(nextPage, forKey: .nextPage)
            try container.encode(isLoadingNextPage, forKey: .isLoadingNextPage)
        }
    }

    /// Actions shown to clients as examples.
    public static let exampleActions: [Action] = [.updateQuery(query: "swift"), .loadNextPage]

    /// Names per page.
    public static let pageSize = 20

    /// What cancels an in-flight search.
    private static let searchID = "search"

    /// No query, no results.
    public let initialState = State()
    /// The reactor runtime.
    public let runtime = ReactorRuntime<SearchReactor>()

    private let names: [String]
    private let latency: Duration
    private let clock: any Clock<Duration>

    /// A search over `names` (the bundled package names by default) whose results arrive
    /// `latency` after each request, measured on `clock`.
    public init(
        names: [String] = PackageCatalog.names,
        latency: Duration = .milliseconds(300),
        clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.names = names
        self.latency = latency
        self.clock = clock
    }

    /// The mutations an action produces.
    public func mutate(action: Action) -> Mutations<Mutation> {
        switch action {
        case .updateQuery(let query):
            let page = search(query, page: 1)
            let results = Mutations.just(Mutation.setResults(page.names, nextPage: page.next))
            return .concat(
                .just(.setQuery(query)),
                (query.isEmpty ? results : results.delayed(by: latency, clock: clock))
                    .cancellable(id: Self.searchID, cancelInFlight: true)
            )
        case .loadNextPage:
            let state = currentState
            guard let next = state.nextPage, !state.isLoadingNextPage else { return .empty }
            let page = search(state.query, page: next)
            return .concat(
                .just(.setLoadingNextPage(true)),
                Mutations.concat(
                    .just(.appendResults(page.names, nextPage: page.next)),
                    .just(.setLoadingNextPage(false))
                )
                .delayed(by: latency, clock: clock)
                .cancellable(id: Self.searchID)
            )
        }
    }

    /// After a crash: makes the results match the query again, and ends a page load. A search
    /// only reads, so what a crash cut off is searched again rather than reported only: a
    /// query whose results had not arrived gets its first page, a next page that had not
    /// arrived is appended, and the search is never left loading (which would refuse every
    /// later `loadNextPage`).
    public func recover(interrupted actions: [InterruptedAction<Action>]) -> Mutations<Mutation> {
        let state = currentState
        // `updateQuery`'s second mutation brings its results; `loadNextPage`'s second appends.
        let resultsMissing = { (wanted: (Action) -> Bool) in
            actions.contains { wanted($0.action) && $0.reducedMutations < 2 }
        }
        if resultsMissing({ if case .updateQuery = $0 { true } else { false } }) {
            let page = search(state.query, page: 1)
            return .concat(.just(.setResults(page.names, nextPage: page.next)), .just(.setLoadingNextPage(false)))
        }
        guard state.isLoadingNextPage else { return .empty }
        if resultsMissing({ $0 == .loadNextPage }), let next = state.nextPage {
            let page = search(state.query, page: next)
            return .concat(.just(.appendResults(page.names, nextPage: page.next)), .just(.setLoadingNextPage(false)))
        }
        return .just(.setLoadingNextPage(false))
    }

    /// The state after one mutation.
    public func reduce(state: State, mutation: Mutation) -> State {
        var state = state
        switch mutation {
        case .setQuery(let query):
            state.query = query
            state.isLoadingNextPage = false
        case .setResults(let results, let nextPage):
            state.results = results
            state.nextPage = nextPage
        case .appendResults(let results, let nextPage):
            state.results += results
            state.nextPage = nextPage
        case .setLoadingNextPage(let isLoading):
            state.isLoadingNextPage = isLoading
        }
        return state
    }

    /// One page of the names containing `query` (case-insensitive); no names for an empty query.
    func search(_ query: String, page: Int) -> (names: [String], next: Int?) {
        guard !query.isEmpty else { return ([], nil) }
        let needle = query.lowercased()
        let matches = names.filter { $0.lowercased().contains(needle) }
        let start = (page - 1) * Self.pageSize
        guard start < matches.count else { return ([], nil) }
        let end = min(start + Self.pageSize, matches.count)
        return (Array(matches[start..<end]), end < matches.count ? page + 1 : nil)
    }
}
