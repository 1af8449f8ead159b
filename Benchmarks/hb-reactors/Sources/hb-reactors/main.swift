import Foundation
import Hummingbird
import NIOCore
import ReactorCore
import ReactorExamples
import Synchronization

// hb-reactors PORT: serves `counter` (delay 0) and `room` through ReactorServer's routes on
// 127.0.0.1 with Hummingbird 2 and prints `hb-reactors listening on http://127.0.0.1:PORT`.
//   POST /reactors {"type":…}        201 {"id":…,"state":…,"type":…,"version":…}
//   POST /reactors/{id}/actions      202 {"seq":N}
//   GET  /reactors/{id}              200 snapshot, ETag = version
//   GET  /reactors/{id}/events       text/event-stream: retry, then `id:/event: state/data:`
//   GET  /healthz                    200 {"status":"ok"}

let encoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return encoder
}()
let decoder = JSONDecoder()

/// One published state; its JSON is encoded at most once, by whoever needs it first.
final class VersionedState<State: Encodable & Sendable>: Sendable {
    let version: UInt64
    let state: State
    private let encoded = Mutex<[UInt8]?>(nil)

    init(version: UInt64, state: State) {
        self.version = version
        self.state = state
    }

    var json: [UInt8] {
        encoded.withLock { cached in
            if let cached { return cached }
            let bytes = (try? Array(encoder.encode(state))) ?? Array("null".utf8)
            cached = bytes
            return bytes
        }
    }
}

/// What a route sees of an instance: JSON in, versioned JSON out.
protocol Instance: AnyObject, Sendable {
    var id: String { get }
    var typeName: String { get }
    func send(_ body: ByteBuffer) throws -> UInt64
    func latest() -> (version: UInt64, json: [UInt8])
    /// Writes the current state, then every later one, as server-sent events until the client goes.
    func writeEvents(to writer: inout any ResponseBodyWriter) async throws
}

struct BadAction: Error {}

/// One reactor: the latest state (for GET) and the live subscribers (for SSE), fed by `observe`.
final class Hosted<R: Reactor>: Instance where R.Action: Decodable, R.State: Encodable {
    private struct Shared {
        var latest: VersionedState<R.State>
        var subscribers: [UInt64: AsyncStream<VersionedState<R.State>>.Continuation] = [:]
        var nextSubscriber: UInt64 = 0
    }

    let id: String
    let typeName: String
    let reactor: R
    private let shared: Mutex<Shared>
    private let token = Mutex<ObservationToken?>(nil)

    init(id: String, typeName: String, reactor: R) {
        self.id = id
        self.typeName = typeName
        self.reactor = reactor
        let current = reactor.currentUpdate
        shared = Mutex(Shared(latest: VersionedState(version: current.version, state: current.state)))
        let observation = reactor.observe { [weak self] update in
            guard let self else { return }
            let state = VersionedState(version: update.version, state: update.state)
            self.shared.withLock { shared in
                shared.latest = state
                for continuation in shared.subscribers.values { continuation.yield(state) }
            }
        }
        token.withLock { $0 = observation }
    }

    func send(_ body: ByteBuffer) throws -> UInt64 {
        guard let action = try? decoder.decode(R.Action.self, from: Data(buffer: body)) else { throw BadAction() }
        return reactor.send(action).sequence
    }

    func latest() -> (version: UInt64, json: [UInt8]) {
        let state = shared.withLock { $0.latest }
        return (state.version, state.json)
    }

    func writeEvents(to writer: inout any ResponseBodyWriter) async throws {
        let (states, continuation) = AsyncStream.makeStream(of: VersionedState<R.State>.self,
                                                            bufferingPolicy: .bufferingNewest(64))
        let key = shared.withLock { shared in
            let key = shared.nextSubscriber
            shared.nextSubscriber += 1
            shared.subscribers[key] = continuation
            continuation.yield(shared.latest)
            return key
        }
        defer { _ = shared.withLock { $0.subscribers.removeValue(forKey: key) } }
        try await writer.write(ByteBuffer(string: "retry: 3000\n\n"))
        for await state in states {
            let json = state.json
            var buffer = ByteBuffer()
            buffer.reserveCapacity(json.count + 40)
            buffer.writeString("id: \(state.version)\nevent: state\ndata: ")
            buffer.writeBytes(json)
            buffer.writeString("\n\n")
            try await writer.write(buffer)
        }
    }
}

/// All live instances.
final class Store: Sendable {
    private let instances = Mutex<[String: any Instance]>([:])

    func create(type: String) -> (any Instance)? {
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255) }
        let id = bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        let instance: any Instance
        switch type {
        case "counter": instance = Hosted(id: id, typeName: type, reactor: CounterReactor(delay: .zero))
        case "room": instance = Hosted(id: id, typeName: type, reactor: RoomReactor())
        default: return nil
        }
        instances.withLock { $0[id] = instance }
        return instance
    }

    func instance(_ id: String) -> (any Instance)? {
        instances.withLock { $0[id] }
    }
}

struct CreateRequest: Decodable { let type: String }

func json(_ status: HTTPResponse.Status, _ bytes: some Collection<UInt8>, etag: UInt64? = nil) -> Response {
    var headers: HTTPFields = [.contentType: "application/json"]
    if let etag { headers[.eTag] = "\"\(etag)\"" }
    return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
}

func snapshot(_ instance: any Instance) -> Response {
    let (version, state) = instance.latest()
    var bytes = Array("{\"id\":\"\(instance.id)\",\"state\":".utf8)
    bytes.append(contentsOf: state)
    bytes.append(contentsOf: ",\"type\":\"\(instance.typeName)\",\"version\":\(version)}".utf8)
    return json(.ok, bytes, etag: version)
}

let store = Store()
let router = Router()

router.get("/healthz") { _, _ in json(.ok, Array(#"{"status":"ok"}"#.utf8)) }

router.post("/reactors") { request, _ -> Response in
    let body = try await request.body.collect(upTo: 1 << 20)
    guard let create = try? decoder.decode(CreateRequest.self, from: Data(buffer: body)),
          let instance = store.create(type: create.type) else {
        return json(.badRequest, Array(#"{"title":"Bad Request"}"#.utf8))
    }
    var response = snapshot(instance)
    response.status = .created
    response.headers[.location] = "/reactors/\(instance.id)"
    return response
}

router.get("/reactors/:id") { _, context -> Response in
    guard let instance = store.instance(context.parameters.get("id") ?? "") else {
        return json(.notFound, Array(#"{"title":"Not Found"}"#.utf8))
    }
    return snapshot(instance)
}

router.post("/reactors/:id/actions") { request, context -> Response in
    guard let instance = store.instance(context.parameters.get("id") ?? "") else {
        return json(.notFound, Array(#"{"title":"Not Found"}"#.utf8))
    }
    let body = try await request.body.collect(upTo: 1 << 20)
    guard let sequence = try? instance.send(body) else {
        return json(.badRequest, Array(#"{"title":"Bad Request"}"#.utf8))
    }
    return json(.accepted, Array("{\"seq\":\(sequence)}".utf8))
}

router.get("/reactors/:id/events") { _, context -> Response in
    guard let instance = store.instance(context.parameters.get("id") ?? "") else {
        return json(.notFound, Array(#"{"title":"Not Found"}"#.utf8))
    }
    let headers: HTTPFields = [.contentType: "text/event-stream; charset=utf-8", .cacheControl: "no-cache"]
    return Response(status: .ok, headers: headers, body: ResponseBody { writer in
        try await instance.writeEvents(to: &writer)
        try await writer.finish(nil)
    })
}

let port = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 0 : 0
let app = Application(
    router: router,
    configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: nil),
    onServerRunning: { channel in
        let line = "hb-reactors listening on http://127.0.0.1:\(channel.localAddress?.port ?? 0)\n"
        FileHandle.standardOutput.write(Data(line.utf8))
    }
)
try await app.runService()
