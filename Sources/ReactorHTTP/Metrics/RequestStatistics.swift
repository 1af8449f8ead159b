import Locking
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What every request adds to the metrics — its route's count by status, its duration, and the
/// service's count of accepted actions — kept per thread and summed when `/metrics` is rendered.
///
/// Each thread writes only its own ``StatisticsShard``, so answering a request never writes a
/// cache line another core wrote last, and takes no lock: recording a request costs about 140
/// instructions, where swift-prometheus's shared histogram and counters took about 1,000.
final class RequestStatistics: Sendable {
    /// Slots per route: the duration buckets, the sum of durations, the usual statuses.
    static let slotsPerRoute = 32
    /// Routes a service may have, the service-wide counters taking the place of one.
    static let routeCapacity = StatisticsShard.slotCount / slotsPerRoute - 1

    /// Histogram bounds in nanoseconds.
    static let bucketBounds: [Int64] = [
        50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000, 25_000_000,
        50_000_000, 100_000_000, 250_000_000, 500_000_000, 1_000_000_000, 2_500_000_000,
        5_000_000_000, 10_000_000_000,
    ]
    /// The bounds as `/metrics` has always printed them (`0.00005` … `1.0` … `10.0`).
    static let bucketLabels = bucketBounds.map { seconds(nanoseconds: $0) }
    /// Statuses counted per thread; any other is counted under a lock (see ``RouteMetrics``).
    static let usualStatuses = [200, 201, 202, 204, 304, 400, 404, 405, 409, 413, 415, 429, 503]

    /// Where in a route's slots each part sits: the buckets (the last one past every bound),
    /// then the sum, then the usual statuses.
    static let sumSlot = bucketBounds.count + 1
    static let firstStatusSlot = sumSlot + 1
    /// The service-wide slot counting accepted actions (in the block after the routes').
    static let actionsSlot = routeCapacity * slotsPerRoute

    private let shards: ThreadShards
    private let routes = Locked<[RouteMetrics]>([])

    /// - Parameter privateShardLimit: the most threads with counters of their own (see
    ///   ``ThreadShards``).
    init(privateShardLimit: Int = 32) {
        precondition(Self.firstStatusSlot + Self.usualStatuses.count <= Self.slotsPerRoute)
        shards = ThreadShards(privateShardLimit: privateShardLimit)
    }

    /// A route's statistics: `http_requests_total` by method and status, and
    /// `http_request_duration_seconds` by route (summed over the route's methods).
    func route(_ route: String, method: String) -> RouteMetrics {
        routes.withLock { routes in
            precondition(routes.count < Self.routeCapacity, "more than \(Self.routeCapacity) routes")
            let statistics = RouteMetrics(
                route: route, method: method, base: routes.count * Self.slotsPerRoute,
                shards: shards)
            routes.append(statistics)
            return statistics
        }
    }

    /// How many shards the threads have made so far, the shared one included.
    var shardCount: Int { shards.all.count }

    /// Counts an accepted action.
    func actionAccepted() { shards.current().add(1, at: Self.actionsSlot) }

    /// The Prometheus text of `http_requests_total`, `http_request_duration_seconds` and
    /// `reactor_actions_accepted_total`.
    func render() -> String {
        let shards = self.shards.all
        let routes = self.routes.withLock { $0 }
        func total(_ slot: Int) -> Int64 { shards.reduce(0) { $0 &+ $1.value(at: slot) } }

        var text = "# HELP http_requests_total HTTP requests answered, by route, method and status.\n"
        text += "# TYPE http_requests_total counter\n"
        for route in routes {
            var counts: [(status: Int, count: Int64)] = []
            for (offset, status) in Self.usualStatuses.enumerated() {
                let count = total(route.base + Self.firstStatusSlot + offset)
                if count > 0 { counts.append((status, count)) }
            }
            counts += route.otherStatuses.map { ($0.key, $0.value) }
            for (status, count) in counts.sorted(by: { $0.status < $1.status }) {
                text += "http_requests_total{route=\"\(route.route)\",method=\"\(route.method)\",status=\"\(status)\"} \(count)\n"
            }
        }

        text += "# HELP http_request_duration_seconds Time from a request's arrival to its answer, by route.\n"
        text += "# TYPE http_request_duration_seconds histogram\n"
        var routeNames: [String] = []
        for route in routes where !routeNames.contains(route.route) { routeNames.append(route.route) }
        for name in routeNames {
            let bases = routes.filter { $0.route == name }.map(\.base)
            func sum(_ slot: Int) -> Int64 { bases.reduce(0) { $0 &+ total($1 + slot) } }
            var cumulative: Int64 = 0
            for (index, label) in Self.bucketLabels.enumerated() {
                cumulative &+= sum(index)
                text += "http_request_duration_seconds_bucket{route=\"\(name)\",le=\"\(label)\"} \(cumulative)\n"
            }
            cumulative &+= sum(Self.bucketBounds.count)
            text += "http_request_duration_seconds_bucket{route=\"\(name)\",le=\"+Inf\"} \(cumulative)\n"
            text += "http_request_duration_seconds_sum{route=\"\(name)\"} \(Self.seconds(nanoseconds: sum(Self.sumSlot)))\n"
            text += "http_request_duration_seconds_count{route=\"\(name)\"} \(cumulative)\n"
        }

        text += "# HELP reactor_actions_accepted_total Actions accepted for reactor instances.\n"
        text += "# TYPE reactor_actions_accepted_total counter\n"
        text += "reactor_actions_accepted_total \(total(Self.actionsSlot))\n"
        return text
    }

    /// Nanoseconds as decimal seconds, exactly: `0.000009294`, `1.5`, `0.0`.
    static func seconds(nanoseconds: Int64) -> String {
        let whole = nanoseconds / 1_000_000_000
        var fraction = String(nanoseconds % 1_000_000_000)
        fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
        while fraction.count > 1 && fraction.hasSuffix("0") { fraction.removeLast() }
        return "\(whole).\(fraction)"
    }
}

/// One route and method's part of ``RequestStatistics``.
final class RouteMetrics: Sendable {
    let route: String
    let method: String
    /// The first of this route's slots in every shard.
    let base: Int
    private let shards: ThreadShards
    /// Statuses other than the usual ones (rare), by status.
    private let others = Locked<[Int: Int64]>([:])

    fileprivate init(route: String, method: String, base: Int, shards: ThreadShards) {
        self.route = route
        self.method = method
        self.base = base
        self.shards = shards
    }

    /// Counts one answered request and records how long it took.
    func requestFinished(status: Int, nanoseconds: Int64) {
        let shard = shards.current()
        let bounds = RequestStatistics.bucketBounds
        var bucket = 0
        while bucket < bounds.count && nanoseconds > bounds[bucket] { bucket += 1 }
        shard.add(1, at: base + bucket)
        shard.add(nanoseconds, at: base + RequestStatistics.sumSlot)
        if let offset = RequestStatistics.usualStatuses.firstIndex(of: status) {
            shard.add(1, at: base + RequestStatistics.firstStatusSlot + offset)
        } else {
            others.withLock { $0[status, default: 0] += 1 }
        }
    }

    fileprivate var otherStatuses: [Int: Int64] { others.withLock { $0 } }
}

/// Each thread's ``StatisticsShard``, found through a thread-specific key.
///
/// Threads come and go (the system's worker threads that fire `?wait` timeouts end when idle and
/// new ones start later), so the shards a thread gets for itself are capped: past
/// `privateShardLimit`, threads share one shard that adds with atomic read-modify-writes. The
/// server's own threads (HTTP and reactor threads, started first and kept) get private shards.
final class ThreadShards: @unchecked Sendable {
    // `@unchecked Sendable`: `key` is set once in `init` and only read afterwards;
    // `pthread_getspecific`/`pthread_setspecific` reach the calling thread's own value; the
    // list of shards is behind a lock, and each shard's slots are atomics.
    private let key: pthread_key_t
    private let shards = Locked<[StatisticsShard]>([])
    /// The shard threads share once the private ones are used up.
    private let sharedShard = StatisticsShard(shared: true)
    /// The most threads with a shard of their own.
    let privateShardLimit: Int

    init(privateShardLimit: Int = 32) {
        self.privateShardLimit = privateShardLimit
        var key = pthread_key_t()
        // Fails only when the process has used up its thread-specific keys (1,024 on Linux).
        precondition(pthread_key_create(&key, nil) == 0, "no thread-specific key left for the metrics")
        self.key = key
    }

    deinit {
        // Threads keep a stale value under the key until they end; the C library never hands
        // out a stale value for a key created later.
        pthread_key_delete(key)
    }

    /// The calling thread's shard: made and registered on its first use, or the shared one.
    func current() -> StatisticsShard {
        if let raw = pthread_getspecific(key) {
            return Unmanaged<StatisticsShard>.fromOpaque(raw).takeUnretainedValue()
        }
        // Kept by the list (or `sharedShard`) as long as these shards, so the pointer under the
        // key stays valid; a thread that ends leaves its counts in the totals.
        let shard = shards.withLock { shards in
            guard shards.count < privateShardLimit else { return sharedShard }
            let shard = StatisticsShard(shared: false)
            shards.append(shard)
            return shard
        }
        pthread_setspecific(key, Unmanaged.passUnretained(shard).toOpaque())
        return shard
    }

    /// Every shard so far, the shared one included.
    var all: [StatisticsShard] { shards.withLock { $0 } + [sharedShard] }
}

/// One thread's counters, or the counters of the threads that share one. Only its own thread
/// adds to a private shard, so an addition is a plain load and store (atomic, so that rendering
/// may read them meanwhile), never a locked instruction; a shared shard adds atomically.
final class StatisticsShard: Sendable {
    /// Room for 127 route and method pairs: the service's routes, each with the standard methods
    /// and `other` a client may try on it, and those on no route (8 + 8 × 8 + 8 with 8 routes).
    static let slotCount = 4096
    private let slots: InlineArray<4096, Atomic<Int64>>
    private let isShared: Bool

    init(shared: Bool) {
        slots = InlineArray { _ in Atomic(0) }
        isShared = shared
    }

    /// Adds `amount` to a slot. A private shard's own thread is the only caller.
    @inline(__always) func add(_ amount: Int64, at slot: Int) {
        if isShared {
            slots[slot].wrappingAdd(amount, ordering: .relaxed)
        } else {
            slots[slot].store(slots[slot].load(ordering: .relaxed) &+ amount, ordering: .relaxed)
        }
    }

    func value(at slot: Int) -> Int64 { slots[slot].load(ordering: .relaxed) }
}
