// Measures the store's SQLite write and read path through two bindings, side by side in one
// process: SQLite's C API (CAPIStore) and GRDB (GRDBStore). Both run the same statements on their
// own database files, alternating over rounds so that neither always goes first.
//
// Usage: sqlite-binding [--seconds S] [--rounds N] [--instances N] [--reads N] [--dir PATH] [--keep]

import CAPIStore
import Foundation
import GRDBStore
import Workload

// MARK: Options

struct Options {
    var seconds = 2.0          // timed work per (variant, batch size, round)
    var rounds = 3
    var instances = 100_000    // instances stored for the read path
    var reads = 10_000         // activations per (variant, round, mode)
    var dir: String?           // parent of the temporary directory (default: $TMPDIR or /tmp)
    var keep = false

    init(_ arguments: [String]) {
        var it = arguments.dropFirst().makeIterator()
        func value(_ flag: String) -> String {
            guard let v = it.next() else { fatalError("\(flag) needs a value") }
            return v
        }
        while let arg = it.next() {
            switch arg {
            case "--seconds": seconds = Double(value(arg))!
            case "--rounds": rounds = Int(value(arg))!
            case "--instances": instances = Int(value(arg))!
            case "--reads": reads = Int(value(arg))!
            case "--dir": dir = value(arg)
            case "--keep": keep = true
            default: fatalError("unknown argument \(arg)")
            }
        }
    }
}

let options = Options(CommandLine.arguments)
let batchSizes = [1, 16, 64, 256]
let writeInstanceCount = 1_000
let historyPerInstance = StoreSQL.historyDepth
let states = Fixtures.states(count: 256)
let actions = Fixtures.actions(count: 16)
let writeIds = Fixtures.ids(count: writeInstanceCount, prefix: "counter")
let readIds = Fixtures.ids(count: options.instances, prefix: "counter")

// MARK: Variants

final class Variant {
    let name: String
    let open: (String) throws -> any StoreBinding
    var writeStore: (any StoreBinding)!
    var readStore: (any StoreBinding)!
    var versions = [Int64](repeating: 0, count: writeInstanceCount)
    var activityClock: Int64 = 0
    var heapOfOpenStore = 0
    var populateSeconds = 0.0
    var writesPerSecond: [Int: [Double]] = [:]     // per batch size, one per round
    var commitLatencies: [Int: [UInt64]] = [:]     // per batch size, all rounds
    var cpuNanosPerWrite: [Int: [Double]] = [:]    // per batch size, one per round
    var totalWrites = 0
    var activationLatencies: [UInt64] = []
    var bareActivationLatencies: [UInt64] = []

    init(name: String, open: @escaping (String) throws -> any StoreBinding) {
        self.name = name
        self.open = open
    }
}

let variants = [
    Variant(name: "C API", open: { try CAPIStore(path: $0) }),
    Variant(name: "GRDB", open: { try GRDBStore(path: $0) }),
]

/// Alternates which variant goes first.
@MainActor func ordered(_ flip: Int) -> [Variant] { flip % 2 == 0 ? variants : variants.reversed() }

// MARK: Workload

/// Commits batches of `batchSize` writes spread at random over the write instances until
/// `seconds` have passed. Returns writes done, wall time, process CPU time, and each commit's latency.
func runWrites(_ v: Variant, batchSize: Int, seconds: Double, seed: UInt64) throws -> (Int, UInt64, UInt64, [UInt64]) {
    var rng = SplitMix64(seed: seed)
    var batch: [Write] = []
    batch.reserveCapacity(batchSize)
    var latencies: [UInt64] = []
    var writes = 0
    let budget = UInt64(seconds * 1e9)
    let cpuStart = processCPUNanos()
    let start = monotonicNanos()
    var now = start
    repeat {
        batch.removeAll(keepingCapacity: true)
        for _ in 0..<batchSize {
            let k = Int(rng.next() % UInt64(writeInstanceCount))
            v.versions[k] += 1
            v.activityClock += 1
            let version = v.versions[k]
            batch.append(Write(id: writeIds[k], type: Fixtures.instanceType, version: version,
                               state: states[Int(version) % states.count],
                               action: actions[Int(version) % actions.count],
                               lastActivity: v.activityClock))
        }
        let t0 = monotonicNanos()
        try v.writeStore.commit(batch)
        now = monotonicNanos()
        latencies.append(now - t0)
        writes += batchSize
    } while now - start < budget
    return (writes, now - start, processCPUNanos() - cpuStart, latencies)
}

/// Activates `count` random stored instances; returns each activation's latency.
func runReads(_ v: Variant, count: Int, seed: UInt64, bare: Bool) throws -> [UInt64] {
    var rng = SplitMix64(seed: seed)
    var latencies: [UInt64] = []
    latencies.reserveCapacity(count)
    var checksum: Int64 = 0
    for _ in 0..<count {
        let id = readIds[Int(rng.next() % UInt64(readIds.count))]
        let t0 = monotonicNanos()
        let activation = bare ? try v.readStore.activateBare(id: id) : try v.readStore.activate(id: id)
        let t1 = monotonicNanos()
        guard let activation, activation.history.count == historyPerInstance,
              activation.history[0].version == activation.version
        else { throw BindingError("\(v.name): bad activation of \(id)") }
        checksum &+= activation.version &+ Int64(activation.state.count)
        latencies.append(t1 - t0)
    }
    if checksum == 0 { print("(checksum \(checksum))") }
    return latencies
}

// MARK: Run

func fmt(_ x: Double, _ decimals: Int = 0) -> String { String(format: "%.\(decimals)f", x) }
func grouped(_ n: Int) -> String {
    let s = String(n)
    var out = ""
    for (i, ch) in s.enumerated() {
        if i > 0, (s.count - i) % 3 == 0 { out.append(",") }
        out.append(ch)
    }
    return out
}
func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

let parent = options.dir ?? ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
var template = Array("\(parent)/sqlite-binding.XXXXXX".utf8CString)
guard let made = mkdtemp(&template) else { fatalError("mkdtemp in \(parent) failed") }
let dir = String(cString: made)

print("sqlite-binding: SQLite \(CAPIStore.sqliteVersion), journal_mode=WAL, synchronous=FULL, files in \(dir)")
print("write path: \(grouped(writeInstanceCount)) instances, \(fmt(options.seconds, 1)) s per (variant, B, round); "
      + "read path: \(grouped(options.instances)) instances x \(historyPerInstance) history rows, "
      + "\(grouped(options.reads)) activations per (variant, round); \(options.rounds) rounds")
print("state documents: \(states.map(\.count).min()!)–\(states.map(\.count).max()!) bytes")

do {
    // Pay one-time costs (SQLite's global initialisation, the runtime's first allocations) before
    // the heap of each store is taken.
    for v in variants {
        let scratch = try v.open("\(dir)/\(v.name == "GRDB" ? "grdb" : "c")-scratch.sqlite")
        try scratch.commit([Write(id: writeIds[0], type: Fixtures.instanceType, version: 1, state: states[0],
                                  action: actions[0], lastActivity: 0)])
        _ = try scratch.activate(id: writeIds[0])
        try scratch.close()
    }
    for v in variants {
        let heapBefore = heapInUseBytes()
        v.writeStore = try v.open("\(dir)/\(v.name == "GRDB" ? "grdb" : "c")-writes.sqlite")
        _ = try runWrites(v, batchSize: 16, seconds: 0.3, seed: 7)   // warm-up, not recorded
        v.heapOfOpenStore = heapInUseBytes() - heapBefore
        let pragmas = try v.writeStore.pragmas()
        guard pragmas.journalMode == "wal", pragmas.synchronous == 2 else {
            throw BindingError("\(v.name): journal_mode=\(pragmas.journalMode) synchronous=\(pragmas.synchronous)")
        }
    }
    for v in ordered(0) {
        v.readStore = try v.open("\(dir)/\(v.name == "GRDB" ? "grdb" : "c")-reads.sqlite")
        let t0 = monotonicNanos()
        try v.readStore.populate(ids: readIds, type: Fixtures.instanceType, historyPerInstance: historyPerInstance,
                                 states: states, instancesPerTransaction: 1_000)
        v.populateSeconds = Double(monotonicNanos() - t0) / 1e9
        let pragmas = try v.readStore.pragmas()
        guard pragmas.synchronous == 2 else { throw BindingError("\(v.name): populate left synchronous=\(pragmas.synchronous)") }
        _ = try runReads(v, count: 1_000, seed: 99, bare: false)      // warm-up, not recorded
        print("populated \(v.name): \(fmt(v.populateSeconds, 1)) s")
    }

    for round in 0..<options.rounds {
        for (j, b) in batchSizes.enumerated() {
            var line = "round \(round + 1) B=\(b):"
            for v in ordered(round + j) {
                let (writes, nanos, cpu, latencies) = try runWrites(v, batchSize: b, seconds: options.seconds,
                                                                seed: UInt64(1_000 * round + b))
                let rate = Double(writes) / (Double(nanos) / 1e9)
                v.writesPerSecond[b, default: []].append(rate)
                v.commitLatencies[b, default: []].append(contentsOf: latencies)
                v.cpuNanosPerWrite[b, default: []].append(Double(cpu) / Double(writes))
                v.totalWrites += writes
                line += " \(v.name) \(fmt(rate)) writes/s (\(latencies.count) commits)"
            }
            print(line)
        }
        var line = "round \(round + 1) activations:"
        for v in ordered(round) {
            let seed = UInt64(round + 1) * 7_919
            let snapshot = try runReads(v, count: options.reads, seed: seed, bare: false)
            let bare = try runReads(v, count: options.reads, seed: seed &+ 1, bare: true)
            v.activationLatencies += snapshot
            v.bareActivationLatencies += bare
            line += " \(v.name) p50 \(fmt(Double(percentile(snapshot, 50)) / 1e3, 1)) µs"
        }
        print(line)
    }

    for v in variants {
        let counts = try v.writeStore.counts()
        let touched = v.versions.filter { $0 > 0 }.count
        let written = Int(v.versions.reduce(0, +))
        guard counts.instances == touched, counts.actions == touched, counts.history == written else {
            throw BindingError("\(v.name): counts \(counts) != (\(touched), \(written), \(touched))")
        }
        try v.writeStore.close()
        try v.readStore.close()
    }
} catch {
    print("error: \(error)")
    if !options.keep { try? FileManager.default.removeItem(atPath: dir) }
    exit(1)
}
if !options.keep { try? FileManager.default.removeItem(atPath: dir) }

// MARK: Report

let c = variants[0], g = variants[1]
var rows: [(String, String, String, String)] = []
@MainActor func row(_ label: String, _ cv: Double, _ gv: Double, _ decimals: Int) {
    rows.append((label, fmt(cv, decimals), fmt(gv, decimals), fmt(gv / cv, 2)))
}
func ms(_ ns: UInt64) -> Double { Double(ns) / 1e6 }
func us(_ ns: UInt64) -> Double { Double(ns) / 1e3 }
for b in batchSizes {
    row("B=\(b): writes/s (median of rounds)", median(c.writesPerSecond[b]!), median(g.writesPerSecond[b]!), 0)
    row("B=\(b): commit p50, ms", ms(percentile(c.commitLatencies[b]!, 50)), ms(percentile(g.commitLatencies[b]!, 50)), 3)
    row("B=\(b): commit p99, ms", ms(percentile(c.commitLatencies[b]!, 99)), ms(percentile(g.commitLatencies[b]!, 99)), 3)
    row("B=\(b): process CPU per write, µs", median(c.cpuNanosPerWrite[b]!) / 1e3, median(g.cpuNanosPerWrite[b]!) / 1e3, 1)
}
row("activation p50, µs (read transaction)", us(percentile(c.activationLatencies, 50)), us(percentile(g.activationLatencies, 50)), 1)
row("activation p99, µs (read transaction)", us(percentile(c.activationLatencies, 99)), us(percentile(g.activationLatencies, 99)), 1)
row("activation p50, µs (no transaction)", us(percentile(c.bareActivationLatencies, 50)), us(percentile(g.bareActivationLatencies, 50)), 1)
row("activation p99, µs (no transaction)", us(percentile(c.bareActivationLatencies, 99)), us(percentile(g.bareActivationLatencies, 99)), 1)
row("populate \(grouped(options.instances)) instances + \(grouped(options.instances * historyPerInstance)) history rows, s",
    c.populateSeconds, g.populateSeconds, 1)
row("heap held by an open write store, KiB", Double(c.heapOfOpenStore) / 1024, Double(g.heapOfOpenStore) / 1024, 0)

print("")
print("writes/s and CPU per write: median over \(options.rounds) rounds; latencies: all commits (activations) of all rounds")
let widths = [max(6, rows.map(\.0.count).max()!), 10, 10, 7]
func line(_ cells: [String]) -> String {
    "| " + zip(cells, widths).enumerated().map { i, p in
        i == 0 ? p.0.padding(toLength: p.1, withPad: " ", startingAt: 0)
               : String(repeating: " ", count: max(0, p.1 - p.0.count)) + p.0
    }.joined(separator: " | ") + " |"
}
print(line(["metric", "C API", "GRDB", "GRDB÷C"]))
print("|" + widths.enumerated().map { i, w in i == 0 ? String(repeating: "-", count: w + 2) : String(repeating: "-", count: w + 1) + ":" }.joined(separator: "|") + "|")
for r in rows { print(line([r.0, r.1, r.2, r.3])) }
