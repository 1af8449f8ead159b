import Foundation
import TestSupport

@testable import ReactorClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An answer from the server.
struct Reply: Sendable {
    let status: Int
    let headers: [String: String]
    let body: Data

    func header(_ name: String) -> String? {
        headers.first { $0.key.lowercased() == name.lowercased() }?.value
    }

    var text: String { String(decoding: body, as: UTF8.self) }

    /// The body parsed as a JSON object.
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
    }
}

/// A URLSession client for one server. It calls URLSession, and is called back, off the
/// concurrency pool, as the Swift client does (`SessionQueues`): with FoundationNetworking, both
/// pool threads were seen blocked in URLSession on two cores, and every test of the run stalled
/// for seconds until one came free.
struct HTTPClient: Sendable {
    let base: String
    private let session: URLSession

    init(base: String) {
        OpenFileLimit.raised
        self.base = base
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 64
        configuration.timeoutIntervalForRequest = 30
        self.session = URLSession(configuration: configuration, delegate: nil, delegateQueue: SessionQueues.delegateQueue())
    }

    func send(
        _ method: String, _ path: String, body: String? = nil,
        headers: [String: String] = [:]
    ) async throws -> Reply {
        var request = URLRequest(url: URL(string: base + path)!)
        request.httpMethod = method
        if let body {
            request.httpBody = Data(body.utf8)
            if headers["Content-Type"] == nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await data(for: request)
        guard let http = response as? HTTPURLResponse else { throw TestFailure("not an HTTP response") }
        var fields: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            fields["\(key)"] = "\(value)"
        }
        return Reply(status: http.statusCode, headers: fields, body: data)
    }

    /// The request's answer. When URLSession could not connect for a reason of its own (not a
    /// refusal), nothing of the request reached the server: a plain connect then shows whether the
    /// server accepts connections. If it does, the request is sent once more, and what happened is
    /// printed; if it does not, the error says why, with this process's descriptor count.
    private func data(for request: URLRequest) async throws -> (Data, URLResponse) {
        do {
            return try await SessionQueues.data(for: request, on: session)
        } catch  where ConnectProbe.isLocalConnectFailure(error) {
            let probe = ConnectProbe(port: UInt16(request.url?.port ?? 0))
            guard probe.connected else { throw TestFailure("\(error.localizedDescription); \(probe)") }
            print("HTTPClient: \(error.localizedDescription); \(probe); sending it again")
            return try await SessionQueues.data(for: request, on: session)
        }
    }

    func get(_ path: String, headers: [String: String] = [:]) async throws -> Reply {
        try await send("GET", path, headers: headers)
    }

    func post(_ path: String, _ body: String, headers: [String: String] = [:]) async throws -> Reply {
        try await send("POST", path, body: body, headers: headers)
    }

    /// Creates an instance (sending `headers`, such as a subject's credentials) and returns its id.
    func create(_ type: String, headers: [String: String] = [:]) async throws -> String {
        let reply = try await post("/reactors", #"{"type":"\#(type)"}"#, headers: headers)
        guard reply.status == 201, let id = reply.json["id"] as? String else {
            throw TestFailure("create \(type): \(reply.status) \(reply.text)")
        }
        return id
    }
}
