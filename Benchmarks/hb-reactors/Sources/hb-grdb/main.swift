import Foundation
import GRDB
import Hummingbird

// hb-grdb PORT DATABASE [--synchronous full|normal]: the example counter as a Swift team would
// write a durable service without ReactorServer: Hummingbird 2 for HTTP, GRDB for SQLite (a
// DatabasePool in WAL mode), one write transaction per request, the 202 sent once it commits.
// With `synchronous=FULL` (the default) every commit is fsynced; with `normal` a commit is
// durable only at the next checkpoint. Prints `hb-grdb listening on http://127.0.0.1:PORT`, after
// the pragmas its writer connection reads back. The routes are ReactorServer's, as far as
// `Benchmarks/loadgen/rsload` uses them:
//   POST /reactors {"type":"counter"}   201 {"id":…,"state":…,"type":"counter","version":0}
//   POST /reactors/{id}/actions         "increase" or "decrease": 202 {"seq":version} once committed
//   GET  /reactors/{id}                 200 {"id":…,"state":…,"type":"counter","version":…}
//   GET  /healthz                       200 {"status":"ok"}

/// The example counter's state, encoded as ReactorServer's counter state is.
struct CounterState: Codable, Sendable {
    struct AlertMessage: Codable, Sendable {
        var count = 0
        var value: String?

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(count, forKey: .count)
            try container.encode(value, forKey: .value)  // null, as the example encodes it
        }
    }

    var alertMessage = AlertMessage()
    var isLoading = false
    var value = 0
}

enum CounterAction: String, Decodable, Sendable {
    case increase, decrease
}

/// A counter's current row.
struct Counter: Codable, Sendable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "counter"
    var id: String
    var value: Int
    var version: Int
    var state: String
}

/// One row per version a counter went through.
struct CounterHistory: Codable, Sendable, PersistableRecord {
    static let databaseTableName = "counterHistory"
    var counterId: String
    var version: Int
    var state: String
}

struct CreateRequest: Decodable { let type: String }

struct Snapshot: ResponseEncodable {
    let id: String
    let state: CounterState
    let type: String
    let version: Int
}

struct Accepted: ResponseEncodable { let seq: Int }
struct Health: ResponseEncodable { let status: String }

let stateEncoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return encoder
}()

func encoded(_ state: CounterState) throws -> String {
    String(decoding: try stateEncoder.encode(state), as: UTF8.self)
}

func snapshot(_ counter: Counter) throws -> Snapshot {
    Snapshot(id: counter.id, state: try JSONDecoder().decode(CounterState.self, from: Data(counter.state.utf8)),
             type: "counter", version: counter.version)
}

// MARK: Arguments

var arguments = Array(CommandLine.arguments.dropFirst())
var synchronous = "FULL"
if let flag = arguments.firstIndex(of: "--synchronous"), flag + 1 < arguments.count {
    synchronous = arguments[flag + 1].uppercased()
    arguments.removeSubrange(flag...flag + 1)
}
guard arguments.count == 2, let port = Int(arguments[0]), ["FULL", "NORMAL"].contains(synchronous) else {
    FileHandle.standardError.write(Data("usage: hb-grdb PORT DATABASE [--synchronous full|normal]\n".utf8))
    exit(2)
}

// MARK: Database

let pool = try DatabasePool(path: arguments[1])
// DatabasePool opens its writer in WAL mode and then sets `synchronous = NORMAL` on it, after any
// `prepareDatabase` hook has run: the level asked for is set here, once the pool is open, and
// read back.
let pragmas = try pool.writeWithoutTransaction { db in
    try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
    return (try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "?",
            try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1)
}
let levels = [0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"]
FileHandle.standardOutput.write(Data(
    "hb-grdb: writer journal_mode=\(pragmas.0) synchronous=\(pragmas.1) (\(levels[pragmas.1] ?? "?"))\n".utf8))
guard levels[pragmas.1] == synchronous else {
    FileHandle.standardError.write(Data("hb-grdb: synchronous is not \(synchronous)\n".utf8))
    exit(1)
}

var migrator = DatabaseMigrator()
migrator.registerMigration("counters") { db in
    try db.create(table: "counter") { table in
        table.primaryKey("id", .text)
        table.column("value", .integer).notNull()
        table.column("version", .integer).notNull()
        table.column("state", .text).notNull()
    }
    try db.create(table: "counterHistory") { table in
        table.column("counterId", .text).notNull().references("counter", onDelete: .cascade)
        table.column("version", .integer).notNull()
        table.column("state", .text).notNull()
        table.primaryKey(["counterId", "version"])
    }
}
try migrator.migrate(pool)

// MARK: Routes

let router = Router()

router.get("/healthz") { _, _ in Health(status: "ok") }

router.post("/reactors") { request, context -> EditedResponse<Snapshot> in
    let create = try await request.decode(as: CreateRequest.self, context: context)
    guard create.type == "counter" else { throw HTTPError(.badRequest, message: "unknown type") }
    let counter = Counter(id: UUID().uuidString.lowercased(), value: 0, version: 0, state: try encoded(CounterState()))
    try await pool.write { db in
        try counter.insert(db)
        try CounterHistory(counterId: counter.id, version: 0, state: counter.state).insert(db)
    }
    return EditedResponse(status: .created, headers: [.location: "/reactors/\(counter.id)"], response: try snapshot(counter))
}

router.get("/reactors/:id") { _, context -> Snapshot in
    let id = try context.parameters.require("id")
    guard let counter = try await pool.read({ db in try Counter.fetchOne(db, key: id) }) else {
        throw HTTPError(.notFound)
    }
    return try snapshot(counter)
}

router.post("/reactors/:id/actions") { request, context -> EditedResponse<Accepted> in
    let id = try context.parameters.require("id")
    let action = try await request.decode(as: CounterAction.self, context: context)
    // One transaction: read the row, apply the action, update the row, keep the new version.
    let version = try await pool.write { db -> Int in
        guard var counter = try Counter.fetchOne(db, key: id) else { throw HTTPError(.notFound) }
        counter.value += action == .increase ? 1 : -1
        counter.version += 1
        counter.state = try encoded(CounterState(value: counter.value))
        try counter.update(db)
        try CounterHistory(counterId: id, version: counter.version, state: counter.state).insert(db)
        return counter.version
    }
    return EditedResponse(status: .accepted, response: Accepted(seq: version))
}

let app = Application(
    router: router,
    configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: nil),
    onServerRunning: { channel in
        let line = "hb-grdb listening on http://127.0.0.1:\(channel.localAddress?.port ?? 0)\n"
        FileHandle.standardOutput.write(Data(line.utf8))
    }
)
try await app.runService()
