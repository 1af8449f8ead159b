import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// The actions of one instance on their way to the server: a bounded queue sent one at a time,
/// in order. While the server cannot be reached the queue waits (backing off) and then goes on
/// where it stopped, so an action sent offline arrives once, after those sent before it.
///
/// An action is sent again only when its request surely never reached the server (no
/// connection could be made) or the server refused it with `429`/`503` and `Retry-After`;
/// after any other failure (a connection cut while waiting for the answer, say) the action may
/// or may not have been applied, and it fails rather than risk applying it twice.
final class ActionOutbox: Sendable {
    private struct Entry: Sendable {
        let body: Data
        let wait: Bool
        let completion: Completion<HTTPReply>
    }

    private struct State {
        /// Not yet answered, oldest first; the first is being sent.
        var entries: [Entry] = []
        var sender: Task<Void, Never>?
        /// Set once the outbox is closed: what every later action fails with.
        var closed: (any Error)?
    }

    private let transport: HTTPTransport
    private let path: String
    private let capacity: Int
    private let policy: ReconnectPolicy
    private let retryHint: @Sendable () -> Int?
    private let reachabilityChanged: @Sendable (_ reachable: Bool) -> Void
    private let state = Mutex(State())

    /// - Parameters:
    ///   - path: where actions are POSTed.
    ///   - capacity: most actions waiting at once.
    ///   - retryHint: the server's latest `retry:` hint, in milliseconds.
    ///   - reachabilityChanged: called with false when an action could not reach the server
    ///     (it waits and tries again), with true when one did.
    init(transport: HTTPTransport, path: String, capacity: Int, policy: ReconnectPolicy,
         retryHint: @escaping @Sendable () -> Int?, reachabilityChanged: @escaping @Sendable (Bool) -> Void) {
        self.transport = transport
        self.path = path
        self.capacity = max(1, capacity)
        self.policy = policy
        self.retryHint = retryHint
        self.reachabilityChanged = reachabilityChanged
    }

    /// How many actions wait to be answered.
    var count: Int { state.withLock { $0.entries.count } }

    /// Queues the action `body` (POSTed with `?wait=true` when `wait`); its answer arrives on
    /// the returned completion. A full or closed queue fails it at once.
    func enqueue(_ body: Data, wait: Bool) -> Completion<HTTPReply> {
        let completion = Completion<HTTPReply>()
        let refusal: (any Error)? = state.withLock { state in
            if let closed = state.closed { return closed }
            guard state.entries.count < capacity else { return RemoteReactorError.queueFull(limit: capacity) }
            state.entries.append(Entry(body: body, wait: wait, completion: completion))
            if state.sender == nil {
                state.sender = Task { await self.sendAll() }
            }
            return nil
        }
        if let refusal { completion.resolve(.failure(refusal)) }
        return completion
    }

    /// Fails every queued action and every later one with `error`, and stops sending.
    func close(with error: any Error) {
        let (entries, sender) = state.withLock { state in
            if state.closed == nil { state.closed = error }
            defer {
                state.entries.removeAll()
                state.sender = nil
            }
            return (state.entries, state.sender)
        }
        sender?.cancel()
        for entry in entries { entry.completion.resolve(.failure(error)) }
    }

    /// Sends the queue's actions one after the other until it is empty.
    private func sendAll() async {
        while let entry = state.withLock({ state -> Entry? in
            if let first = state.entries.first { return first }
            state.sender = nil
            return nil
        }) {
            let result = await send(entry)
            state.withLock { state in
                if state.entries.first?.completion === entry.completion { state.entries.removeFirst() }
            }
            entry.completion.resolve(result)
            if Task.isCancelled { return }
        }
    }

    /// Sends one action, again while the server cannot be reached.
    private func send(_ entry: Entry) async -> Result<HTTPReply, any Error> {
        var failures = 0
        while true {
            do {
                let query = entry.wait ? [URLQueryItem(name: "wait", value: "true")] : []
                let reply = try await transport.send("POST", path, query: query, json: entry.body)
                if failures > 0 { reachabilityChanged(true) }
                return .success(reply)
            } catch let error as URLError where error.requestNeverSent && !Task.isCancelled {
                if failures == 0 { reachabilityChanged(false) }
                do {
                    try await Task.sleep(for: policy.delay(afterFailures: failures, retryHint: retryHint()))
                } catch {
                    return .failure(RemoteReactorError.closed)
                }
                failures += 1
            } catch {
                return .failure(Task.isCancelled ? RemoteReactorError.closed : error)
            }
        }
    }
}

extension URLError {
    /// Whether the request failed before any of it reached a server: no connection was made.
    var requestNeverSent: Bool {
        switch code {
        case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet: true
        default: false
        }
    }
}
