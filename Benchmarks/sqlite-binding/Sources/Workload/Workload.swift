import CMallocStats
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The store's schema and statements, shared verbatim by both bindings.
public enum StoreSQL {
    public static let schema = [
        "CREATE TABLE IF NOT EXISTS instances(id TEXT PRIMARY KEY, type TEXT, version INTEGER, state BLOB, last_activity INTEGER)",
        "CREATE TABLE IF NOT EXISTS history(id TEXT, version INTEGER, state BLOB, PRIMARY KEY(id, version)) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS actions(id TEXT, seq INTEGER, action BLOB, PRIMARY KEY(id, seq)) WITHOUT ROWID",
    ]
    public static let upsertInstance = """
        INSERT INTO instances(id, type, version, state, last_activity) VALUES (?, ?, ?, ?, ?) \
        ON CONFLICT(id) DO UPDATE SET version = excluded.version, state = excluded.state, \
        last_activity = excluded.last_activity
        """
    public static let insertHistory = "INSERT INTO history(id, version, state) VALUES (?, ?, ?)"
    public static let insertAction = "INSERT INTO actions(id, seq, action) VALUES (?, ?, ?)"
    public static let deleteAction = "DELETE FROM actions WHERE id = ? AND seq = ?"
    public static let loadInstance = "SELECT type, version, state, last_activity FROM instances WHERE id = ?"
    public static let loadHistory = "SELECT version, state FROM history WHERE id = ? ORDER BY version DESC LIMIT 32"
    /// How many history rows an activation loads.
    public static let historyDepth = 32
}

/// One write of the store: the instance's new state, its history row, its pending action (and the
/// deletion of the action row of the instance's previous write, seq == version - 1).
public struct Write: Sendable {
    public var id: String
    public var type: String
    public var version: Int64
    public var state: Data
    public var action: Data
    public var lastActivity: Int64

    public init(id: String, type: String, version: Int64, state: Data, action: Data, lastActivity: Int64) {
        self.id = id
        self.type = type
        self.version = version
        self.state = state
        self.action = action
        self.lastActivity = lastActivity
    }
}

public struct HistoryEntry: Sendable {
    public var version: Int64
    public var state: Data
    public init(version: Int64, state: Data) {
        self.version = version
        self.state = state
    }
}

/// What an activation loads: the instance row and its newest history rows (newest first).
public struct Activation: Sendable {
    public var type: String
    public var version: Int64
    public var state: Data
    public var lastActivity: Int64
    public var history: [HistoryEntry]
    public init(type: String, version: Int64, state: Data, lastActivity: Int64, history: [HistoryEntry]) {
        self.type = type
        self.version = version
        self.state = state
        self.lastActivity = lastActivity
        self.history = history
    }
}

/// The operations the benchmark times, implemented once per binding. Each object owns one
/// connection to one database file, opened with journal_mode=WAL and synchronous=FULL.
public protocol StoreBinding: AnyObject {
    /// Runs `writes` in one transaction (BEGIN IMMEDIATE … COMMIT): one durable commit.
    func commit(_ writes: [Write]) throws
    /// Loads one instance and its newest `StoreSQL.historyDepth` history rows inside one read
    /// transaction, so the two reads see one snapshot. Nil when the id is unknown.
    func activate(id: String) throws -> Activation?
    /// The same two reads without the enclosing transaction (each statement its own snapshot).
    func activateBare(id: String) throws -> Activation?
    /// Bulk load for the read benchmark: `ids.count` instances with `historyPerInstance` history
    /// rows each, `instancesPerTransaction` instances a transaction, with synchronous=OFF for the
    /// duration of the load only.
    func populate(ids: [String], type: String, historyPerInstance: Int, states: [Data], instancesPerTransaction: Int) throws
    /// The connection's journal_mode and synchronous settings, as SQLite reports them.
    func pragmas() throws -> (journalMode: String, synchronous: Int)
    /// Row counts of instances, history and actions.
    func counts() throws -> (instances: Int, history: Int, actions: Int)
    func close() throws
}

public struct BindingError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

// MARK: - Helpers shared by the harness

/// Monotonic clock in nanoseconds.
@inline(__always)
public func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// CPU time the whole process has used, in nanoseconds (user + system, all threads).
@inline(__always)
public func processCPUNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// SplitMix64: deterministic, so both bindings see the same id sequence.
public struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

public enum Fixtures {
    public static let instanceType = "counter"

    /// Instance ids shaped like the store's (a type prefix and a 12-hex-digit suffix).
    public static func ids(count: Int, prefix: String) -> [String] {
        (0..<count).map { i in
            let hex = String(i, radix: 16)
            return "\(prefix)-" + String(repeating: "0", count: max(0, 12 - hex.count)) + hex
        }
    }

    /// `count` distinct state documents of about 150 bytes of JSON each.
    public static func states(count: Int) -> [Data] {
        var rng = SplitMix64(seed: 42)
        return (0..<count).map { i in
            let value = Int(rng.next() % 1_000_000)
            let tag = String(rng.next() % 0xFFFF_FFFF, radix: 16)
            let json = #"{"count":\#(value),"label":"counter \#(i) \#(tag)","step":\#(i % 7 + 1),"#
                + #""limits":{"min":-1000000,"max":1000000},"history":[\#(value - 1),\#(value - 2),\#(value - 3)],"#
                + #""flags":["durable","tracked"]}"#
            return Data(json.utf8)
        }
    }

    /// `count` distinct action documents (a few dozen bytes of JSON each).
    public static func actions(count: Int) -> [Data] {
        (0..<count).map { i in Data(#"{"type":"increment","by":\#(i % 9 + 1),"source":"api"}"#.utf8) }
    }
}

/// Nearest-rank percentile of an unsorted sample (copied and sorted).
public func percentile(_ samples: [UInt64], _ p: Double) -> UInt64 {
    precondition(!samples.isEmpty)
    let sorted = samples.sorted()
    let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
    return sorted[min(max(rank, 1), sorted.count) - 1]
}

/// Bytes the process holds in malloc'd memory now (glibc mallinfo2: in-use ordinary + mmapped blocks).
public func heapInUseBytes() -> Int {
    Int(malloc_stats_in_use())
}
