import Foundation
import Locking
import Observation
import ReactorCore

/// A reactor instance on a server, used from an app as if it were local: the app shares the
/// reactor's `Action` and `State` types with the server (one module both depend on), sends
/// actions and reads states.
///
/// ```swift
/// let counter = try await RemoteReactor<CounterReactor>.create(type: "counter", at: server)
/// counter.send(.increase)
/// for await state in counter.states { print(state.version, state.state.value) }
/// ```
///
/// It is `Observable`: a SwiftUI view reads ``currentState`` and updates when it changes, while
/// something consumes the states (`.task { await counter.run() }`).
///
/// **The event stream** is open while at least one iteration of ``states`` or ``events`` (or a
/// ``run()``) is running, and closed when the last one ends (its task is cancelled). It
/// reconnects by itself with `Last-Event-ID` after a drop or a server restart, waiting as the
/// server's `retry:` hint says and backing off; states arrive in version order, some skipped
/// after a gap, none repeated. One exception: when the server no longer has the versions the
/// client last saw (a backup restored in place of a lost store), it says so on reconnecting,
/// and the state it sends next replaces the client's though its version is lower.
///
/// **Actions** go out one at a time in the order they were sent, through a bounded queue that
/// holds them while the server cannot be reached. Each carries an `Idempotency-Key` of its own,
/// so one whose connection was cut before the answer is sent again, and applied once.
///
/// **The id** is the session's only credential: keep it (``id``) to ``attach(id:at:configuration:)``
/// again after a relaunch. On a server that authenticates its callers, the session is also its
/// creator's only: every request carries the bearer token of
/// ``RemoteReactorConfiguration/tokenProvider``. Releasing the reactor (or ``close()``) stops its
/// stream and fails the actions still queued.
public final class RemoteReactor<R: Reactor>: Observable, Sendable {
    /// The instance's id on the server.
    public let id: String
    /// The name its type is registered under on the server, `counter` say.
    public let type: String
    /// The server's base URL.
    public let server: URL

    private struct Storage {
        var latest: VersionedState<R.State>
        var endReason: EndReason?
        var lastFailure: MutationFailure?
        var connection = ConnectionStatus.idle
        var waitingForServer = false
        var subscribers: [Int: AsyncStream<RemoteEvent<R.State>>.Continuation] = [:]
        var nextSubscriber = 0
        var stream: Task<Void, Never>?
        /// The server said the instance is behind ``latest`` (`event: rewound`): the next state
        /// replaces it even with a lower version.
        var isRewound = false
    }

    private let storage: Locked<Storage>
    private let registrar = ObservationRegistrar()
    private let transport: HTTPTransport
    private let connection: EventStreamConnection
    private let outbox: ActionOutbox
    private let configuration: RemoteReactorConfiguration

    private init(
        snapshot: InstanceSnapshot<R.State>, server: URL, transport: HTTPTransport,
        configuration: RemoteReactorConfiguration
    ) {
        self.id = snapshot.id
        self.type = snapshot.type
        self.server = server
        self.transport = transport
        self.configuration = configuration
        self.storage = Locked(Storage(latest: snapshot.versioned))
        let path = "/reactors/\(Self.pathSegment(snapshot.id))"
        let connection = EventStreamConnection(transport: transport, path: path + "/events", policy: configuration.reconnect)
        self.connection = connection
        let waiting = WeakReference<RemoteReactor>()
        self.outbox = ActionOutbox(
            transport: HTTPTransport.forActions(server: server, configuration: configuration),
            path: path + "/actions", capacity: configuration.queueCapacity,
            policy: configuration.reconnect, retryHint: { connection.retryHint },
            reachabilityChanged: { waiting.object?.setWaitingForServer(!$0) })
        waiting.object = self
    }

    deinit {
        outbox.close(with: RemoteReactorError.closed)
        storage.withLock { $0.stream }?.cancel()
    }

    // MARK: - Creating and attaching

    /// Creates an instance of the reactor type registered as `type` on the server at `server`.
    /// - Throws: ``ReactorProblem`` when the server refuses (an unknown type, too many
    ///   instances after the retries `Retry-After` earns, `unauthenticated` when the token was
    ///   refused after a refresh); a `URLError` when it cannot be reached.
    public static func create(
        type: String, at server: URL,
        configuration: RemoteReactorConfiguration = RemoteReactorConfiguration()
    ) async throws -> RemoteReactor {
        let transport = HTTPTransport(server: server, configuration: configuration)
        let body = try JSONEncoder().encode(["type": type])
        let reply = try await transport.send("POST", "/reactors", json: body)
        return try RemoteReactor(reply: reply, server: server, transport: transport, configuration: configuration)
    }

    /// Creates an instance of the reactor type registered as `type` with creation parameters:
    /// `POST /reactors {"type": type, "parameters": parameters}`. The server decodes them as the
    /// type's parameters and keeps them with the session.
    /// - Throws: ``ReactorProblem`` when the server refuses: of kind `invalid-parameters` (422) when
    ///   the parameters do not decode as the type's, its detail naming the field; an unknown type,
    ///   too many instances after the retries `Retry-After` earns. A `URLError` when it cannot be
    ///   reached.
    public static func create<Parameters: Encodable & Sendable>(
        type: String, parameters: Parameters, at server: URL,
        configuration: RemoteReactorConfiguration = RemoteReactorConfiguration()
    ) async throws -> RemoteReactor {
        let transport = HTTPTransport(server: server, configuration: configuration)
        let body = try JSONEncoder().encode(CreationBody(type: type, parameters: parameters))
        let reply = try await transport.send("POST", "/reactors", json: body)
        return try RemoteReactor(reply: reply, server: server, transport: transport, configuration: configuration)
    }

    /// Attaches to the existing instance `id` (one this app created before a relaunch, or shared
    /// with it), starting from its current state.
    /// - Throws: ``ReactorProblem`` of kind `unknown-instance` when the server does not know the
    ///   id (deleted, expired; with authentication, also when another subject created it), of
    ///   kind `unauthenticated` when the token was refused after a refresh; a `URLError` when it
    ///   cannot be reached.
    public static func attach(
        id: String, at server: URL,
        configuration: RemoteReactorConfiguration = RemoteReactorConfiguration()
    ) async throws -> RemoteReactor {
        let transport = HTTPTransport(server: server, configuration: configuration)
        let reply = try await transport.send("GET", "/reactors/\(pathSegment(id))")
        return try RemoteReactor(reply: reply, server: server, transport: transport, configuration: configuration)
    }

    /// The body of a creation with parameters.
    private struct CreationBody<Parameters: Encodable>: Encodable {
        let type: String
        let parameters: Parameters
    }

    private convenience init(
        reply: HTTPReply, server: URL, transport: HTTPTransport,
        configuration: RemoteReactorConfiguration
    ) throws {
        self.init(snapshot: try Self.snapshot(reply), server: server, transport: transport, configuration: configuration)
    }

    // MARK: - State

    /// The latest state the client has: the instance's state at ``version``.
    public var currentState: R.State { latest.state }

    /// The version of ``currentState``.
    public var version: UInt64 { latest.version }

    /// The latest state with its version.
    public var latest: VersionedState<R.State> {
        registrar.access(self, keyPath: \.latest)
        return storage.withLock { $0.latest }
    }

    /// Why the instance ended for good, once it did (``EndReason/isFinal``).
    public var endReason: EndReason? {
        registrar.access(self, keyPath: \.endReason)
        return storage.withLock { $0.endReason }
    }

    /// The latest action whose mutations threw on the server (its `event: error`).
    public var lastFailure: MutationFailure? {
        registrar.access(self, keyPath: \.lastFailure)
        return storage.withLock { $0.lastFailure }
    }

    /// Whether the event stream is open.
    public var connectionStatus: ConnectionStatus {
        registrar.access(self, keyPath: \.connectionStatus)
        return storage.withLock { $0.connection }
    }

    /// How many actions wait for the server (queued while it cannot be reached, or on their way).
    public var queuedActionCount: Int { outbox.count }

    /// Whether queued actions wait because the server could not be reached; they go out, in
    /// order, once it can.
    public var isWaitingForServer: Bool {
        registrar.access(self, keyPath: \.isWaitingForServer)
        return storage.withLock { $0.waitingForServer }
    }

    /// The states, the current one first; see ``RemoteStates``.
    public var states: RemoteStates<R.State> { RemoteStates(events: events) }

    /// Everything heard from the instance: states, mutation failures, the stream opening and
    /// dropping, the end; see ``RemoteEvents``.
    public var events: RemoteEvents<R.State> {
        RemoteEvents { [weak self] in
            guard let self else { return AsyncStream { $0.finish() } }
            return self.subscribe()
        }
    }

    /// Keeps the event stream open (so that ``currentState`` follows the server) until the
    /// calling task is cancelled or the instance ends for good. In SwiftUI:
    /// `.task { await counter.run() }`.
    public func run() async {
        for await _ in events {}
    }

    // MARK: - Actions

    /// Sends `action`: it is queued and goes out after those sent before it. Returns at once;
    /// await the result's ``SentAction/seq`` for the action's sequence number.
    @discardableResult
    public func send(_ action: R.Action) -> SentAction {
        SentAction(answer: enqueue(action, wait: false))
    }

    /// Sends `action` and, when `andWait` is true, returns the instance's state once every
    /// mutation of that action has been reduced (the server's `?wait=true`). When `andWait` is
    /// false it returns once the server accepted the action, with the latest state the client
    /// has then (the action's effects follow on ``states``).
    /// - Throws: what ``SentAction/seq`` throws; ``RemoteReactorError/waitTimedOut(seq:)`` when
    ///   the server's wait timeout passed first.
    public func send(_ action: R.Action, andWait: Bool) async throws -> VersionedState<R.State> {
        guard andWait else {
            _ = try await send(action).seq
            return latest
        }
        let reply = try await enqueue(action, wait: true).value
        if reply.status == 202 {
            throw RemoteReactorError.waitTimedOut(seq: try await SentAction(answer: Self.resolved(reply)).seq)
        }
        let state = try Self.snapshot(reply).versioned
        publish(state)
        return state
    }

    private func enqueue(_ action: R.Action, wait: Bool) -> Completion<HTTPReply> {
        do {
            return outbox.enqueue(try JSONEncoder().encode(action), wait: wait)
        } catch {
            return Self.resolved(failure: error)
        }
    }

    // MARK: - Ending

    /// Deletes the instance on the server: its work is cancelled and every client's stream ends
    /// with ``EndReason/deleted``.
    public func delete() async throws {
        _ = try await transport.send("DELETE", "/reactors/\(Self.pathSegment(id))")
        end(.deleted)
    }

    /// Stops the event stream and fails the actions still queued; the instance lives on, on the
    /// server, for this or another client to attach to.
    public func close() {
        outbox.close(with: RemoteReactorError.closed)
        let (subscribers, stream) = storage.withLock { storage in
            defer {
                storage.subscribers.removeAll()
                storage.stream = nil
            }
            return (Array(storage.subscribers.values), storage.stream)
        }
        stream?.cancel()
        for subscriber in subscribers { subscriber.finish() }
        setConnection(.idle)
    }

    // MARK: - The event stream

    private func subscribe() -> AsyncStream<RemoteEvent<R.State>> {
        let (stream, continuation) = AsyncStream<RemoteEvent<R.State>>.makeStream(
            bufferingPolicy: .bufferingNewest(max(2, configuration.bufferedEvents)))
        let opens = storage.withLock { storage -> Bool in
            continuation.yield(.state(storage.latest))
            if let reason = storage.endReason {
                continuation.yield(.ended(reason))
                continuation.finish()
                return false
            }
            storage.nextSubscriber += 1
            let subscriber = storage.nextSubscriber
            storage.subscribers[subscriber] = continuation
            continuation.onTermination = { [weak self] _ in self?.unsubscribe(subscriber) }
            guard storage.stream == nil else { return false }
            storage.stream = Task { await self.stream() }
            return true
        }
        if opens { setConnection(.connecting) }
        return stream
    }

    private func unsubscribe(_ subscriber: Int) {
        let stream = storage.withLock { storage -> Task<Void, Never>? in
            guard storage.subscribers.removeValue(forKey: subscriber) != nil, storage.subscribers.isEmpty else { return nil }
            defer { storage.stream = nil }
            return storage.stream
        }
        guard let stream else { return }
        stream.cancel()
        if endReason == nil { setConnection(.idle) }
    }

    /// Runs the connection until it is cancelled or the instance ends.
    private func stream() async {
        await connection.run(lastEventID: { [weak self] in self?.storage.withLock { $0.latest.version } }) { [weak self] signal in
            guard let self, !Task.isCancelled else { return }
            switch signal {
            case .connected:
                setConnection(.connected)
            case .reconnecting:
                setConnection(.reconnecting)
            case .event(let event):
                receive(event)
            case .ended(let reason):
                end(reason)
            }
        }
    }

    private func receive(_ event: ServerSentEvent) {
        switch event.name {
        case "state":
            guard let version = event.id.flatMap(UInt64.init),
                let state = try? JSONDecoder().decode(R.State.self, from: Data(event.data.utf8))
            else { return }
            publish(VersionedState(version: version, state: state))
        case "rewound":
            storage.withLock { $0.isRewound = true }
        case "error":
            guard let failure = try? JSONDecoder().decode(MutationFailure.self, from: Data(event.data.utf8)) else { return }
            registrar.withMutation(of: self, keyPath: \.lastFailure) {
                storage.withLock { storage in
                    storage.lastFailure = failure
                    for subscriber in storage.subscribers.values { subscriber.yield(.mutationFailed(failure)) }
                }
            }
        default:
            break
        }
    }

    /// Makes `state` the latest and hands it to the subscribers, unless the client already has
    /// that version or a later one (and the server has not said it is behind the client).
    private func publish(_ state: VersionedState<R.State>) {
        registrar.withMutation(of: self, keyPath: \.latest) {
            storage.withLock { storage in
                guard state.version > storage.latest.version || storage.isRewound else { return }
                storage.isRewound = false
                storage.latest = state
                for subscriber in storage.subscribers.values { subscriber.yield(.state(state)) }
            }
        }
    }

    private func setWaitingForServer(_ waiting: Bool) {
        registrar.withMutation(of: self, keyPath: \.isWaitingForServer) {
            storage.withLock { $0.waitingForServer = waiting }
        }
    }

    private func setConnection(_ status: ConnectionStatus) {
        registrar.withMutation(of: self, keyPath: \.connectionStatus) {
            storage.withLock { storage in
                guard storage.connection != status, storage.connection != .ended else { return }
                storage.connection = status
                for subscriber in storage.subscribers.values { subscriber.yield(.connection(status)) }
            }
        }
    }

    /// The instance ended for good: every subscriber gets the reason and finishes, and queued
    /// actions fail.
    private func end(_ reason: EndReason) {
        outbox.close(with: RemoteReactorError.ended(reason))
        registrar.withMutation(of: self, keyPath: \.endReason) {
            registrar.withMutation(of: self, keyPath: \.connectionStatus) {
                let (subscribers, stream) = storage.withLock { storage in
                    if storage.endReason == nil { storage.endReason = reason }
                    storage.connection = .ended
                    defer {
                        storage.subscribers.removeAll()
                        storage.stream = nil
                    }
                    return (Array(storage.subscribers.values), storage.stream)
                }
                for subscriber in subscribers {
                    subscriber.yield(.connection(.ended))
                    subscriber.yield(.ended(reason))
                    subscriber.finish()
                }
                stream?.cancel()
            }
        }
    }

    // MARK: - Helpers

    /// The id as one path segment (ids the server makes need no escaping; others are escaped).
    private static func pathSegment(_ id: String) -> String {
        id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/?#"))) ?? id
    }

    private static func snapshot(_ reply: HTTPReply) throws -> InstanceSnapshot<R.State> {
        do {
            return try JSONDecoder().decode(InstanceSnapshot<R.State>.self, from: reply.body)
        } catch {
            throw RemoteReactorError.unexpectedResponse(
                status: reply.status, detail: "not an instance of the expected type: \(error)")
        }
    }

    private static func resolved(_ reply: HTTPReply) -> Completion<HTTPReply> {
        let completion = Completion<HTTPReply>()
        completion.resolve(.success(reply))
        return completion
    }

    private static func resolved(failure: any Error) -> Completion<HTTPReply> {
        let completion = Completion<HTTPReply>()
        completion.resolve(.failure(failure))
        return completion
    }
}
