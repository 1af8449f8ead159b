import Foundation
import Locking

/// An instance's event stream, kept open: it connects, hands on each event, and after a drop
/// or an end that means "reconnect" (`shutdown`, `moved`, `unavailable`) connects again with
/// `Last-Event-ID`, waiting as the server's `retry:` hint and ``ReconnectPolicy`` say. It stops
/// when its task is cancelled or the instance ends for good. Each connection carries the token
/// provider's current token; a `401` connects again at once with a refreshed one, and a second
/// `401` in a row ends it (``EndReason/unauthenticated``) rather than trying for ever.
final class EventStreamConnection: Sendable {
    /// What the connection reports, in order.
    enum Signal: Sendable {
        /// The server answered `200`: the stream is open.
        case connected
        /// An `event: state` or `event: error` (the `end` event is reported as ``ended(_:)``).
        case event(ServerSentEvent)
        /// The stream dropped or ended with a reason that means "reconnect"; the connection
        /// waits, then connects again.
        case reconnecting(EndReason?)
        /// The instance ended for good.
        case ended(EndReason)
    }

    private let transport: HTTPTransport
    private let path: String
    private let policy: ReconnectPolicy
    private let hint = Locked<Int?>(nil)

    init(transport: HTTPTransport, path: String, policy: ReconnectPolicy) {
        self.transport = transport
        self.path = path
        self.policy = policy
    }

    /// The server's latest `retry:` hint, in milliseconds.
    var retryHint: Int? { hint.withLock { $0 } }

    /// Connects, and reconnects, until the task is cancelled or the instance ends for good.
    /// - Parameters:
    ///   - lastEventID: the version the client has, read before each connection.
    ///   - report: called with each signal, one at a time.
    func run(lastEventID: @Sendable () -> UInt64?, report: @Sendable (Signal) -> Void) async {
        var failures = 0
        var refreshesToken = false
        while !Task.isCancelled {
            let outcome: Outcome
            do {
                let token = try await transport.token(refresh: refreshesToken)
                outcome = await connectOnce(lastEventID: lastEventID(), token: token, report: report)
            } catch {
                // The token provider failed (its own server cannot be reached, say): as if the
                // connection had.
                outcome = .dropped(wasOpen: false)
            }
            if Task.isCancelled { return }
            if case .refused(let problem) = outcome, problem.status == 401 {
                guard transport.authenticates, !refreshesToken else {
                    report(.ended(.unauthenticated))
                    return
                }
                refreshesToken = true
                continue
            }
            refreshesToken = false
            var delay: Duration
            switch outcome {
            case .ended(let reason) where reason.isFinal:
                report(.ended(reason))
                return
            case .ended(let reason):
                failures = 0
                report(.reconnecting(reason))
                delay = policy.delay(afterFailures: 0, retryHint: retryHint)
            case .dropped(let wasOpen):
                failures = wasOpen ? 0 : failures + 1
                report(.reconnecting(nil))
                delay = policy.delay(afterFailures: failures, retryHint: retryHint)
            case .refused(let problem):
                failures += 1
                report(.reconnecting(nil))
                delay = policy.delay(afterFailures: failures, retryHint: retryHint)
                if let seconds = problem.retryAfter { delay = max(delay, min(.seconds(seconds), policy.maximumDelay)) }
            }
            do { try await Task.sleep(for: delay) } catch { return }
        }
    }

    private enum Outcome {
        /// The server sent `event: end`.
        case ended(EndReason)
        /// The connection failed or closed without an end; `wasOpen` when it had been answered `200`.
        case dropped(wasOpen: Bool)
        /// The server answered with a problem other than `404`.
        case refused(ReactorProblem)
    }

    private func connectOnce(lastEventID: UInt64?, token: String?, report: @Sendable (Signal) -> Void) async -> Outcome {
        var parser = ServerSentEventParser()
        var response: HTTPReply?
        var refusalBody = Data()
        do {
            for try await part in transport.eventStream(path, lastEventID: lastEventID, token: token) {
                switch part {
                case .response(let reply):
                    response = reply
                    if reply.status == 200 { report(.connected) }
                case .bytes(let data) where response?.status != 200:
                    refusalBody.append(data)
                case .bytes(let data):
                    let events = parser.feed(data)
                    if let milliseconds = parser.retryMilliseconds { hint.withLock { $0 = milliseconds } }
                    for event in events {
                        guard event.name == "end" else {
                            report(.event(event))
                            continue
                        }
                        return .ended(Self.endReason(event.data))
                    }
                }
            }
        } catch {
            return .dropped(wasOpen: response?.status == 200)
        }
        guard var reply = response, reply.status != 200 else { return .dropped(wasOpen: response != nil) }
        reply.body = refusalBody
        // No such instance: deleted or expired while the client was away.
        if reply.status == 404 { return .ended(.unknownInstance) }
        return .refused(reply.problem)
    }

    /// The reason in an `event: end`'s data, `{"reason":"deleted"}`.
    static func endReason(_ data: String) -> EndReason {
        struct End: Decodable { var reason: String }
        let reason = try? JSONDecoder().decode(End.self, from: Data(data.utf8)).reason
        return EndReason(rawValue: reason ?? "unknown")
    }
}
