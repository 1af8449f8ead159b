import Foundation
import Locking

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The actions of one instance on their way to the server: a bounded queue sent one at a time,
/// in order. While the server cannot be reached the queue waits (backing off) and then goes on
/// where it stopped, so an action sent offline arrives once, after those sent before it.
///
/// Each action carries an `Idempotency-Key` of its own, the same on every attempt, so it is sent
/// again after any network failure (no connection could be made, or one was cut while waiting
/// for the answer): the server applies it once and answers a retry as the first attempt. The
/// server's refusals with `429`/`503` and `Retry-After` are retried too; other problems fail it.
final class ActionOutbox: Sendable {
    private struct Entry: Sendable {
        let body: Data
        let wait: Bool
        let completion: Completion<HTTPReply>
        /// Sent with every attempt, so the server applies the action once.
        let idempotencyKey = UUID().uuidString
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
    private let state = Locked(State())

    /// - Parameters:
    ///   - path: where actions are POSTed.
    ///   - capacity: most actions waiting at once.
    ///   - retryHint: the server's latest `retry:` hint, in milliseconds.
    ///   - reachabilityChanged: called with false when an action could not reach the server
    ///     (it waits and tries again), with true when one did.
    init(
        transport: HTTPTransport, path: String, capacity: Int, policy: ReconnectPolicy,
        retryHint: @escaping @Sendable () -> Int?, reachabilityChanged: @escaping @Sendable (Bool) -> Void
    ) {
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
                let reply = try await transport.send(
                    "POST", path, query: query, json: entry.body,
                    headers: ["Idempotency-Key": entry.idempotencyKey])
                if failures > 0 { reachabilityChanged(true) }
                return .success(reply)
            } catch let error as URLError where error.isTransient && !Task.isCancelled {
                // Whether or not the request reached the server, the same key makes a retry safe.
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
    /// Whether the network failed the request, so that it may succeed later: no connection
    /// could be made, or one was lost or timed out before the answer was read whole.
    var isTransient: Bool {
        switch code {
        case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet,
            .networkConnectionLost, .timedOut, .badServerResponse, .cannotParseResponse,
            .zeroByteResource, .dataNotAllowed, .internationalRoamingOff, .callIsActive:
            true
        default:
            false
        }
    }
}
