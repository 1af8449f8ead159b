import Foundation

/// An action on its way to the server, as ``RemoteReactor/send(_:)`` returns it: its sequence
/// number on the instance once the server accepted it.
///
/// ```swift
/// let seq = try await counter.send(.increase).seq
/// ```
public struct SentAction: Sendable {
    let answer: Completion<HTTPReply>

    /// The action's sequence number on the instance (1, 2, 3 …), once the server accepted it.
    /// Waits while the action is queued (the server cannot be reached).
    /// - Throws: ``ReactorProblem`` when the server refused it (an unknown action, say);
    ///   ``RemoteReactorError`` when it was not sent (a full queue, a closed reactor, an ended
    ///   instance); a `URLError` when the connection failed while the action was on its way.
    public var seq: UInt64 {
        get async throws {
            struct Receipt: Decodable { var seq: UInt64 }
            let reply = try await answer.value
            guard let receipt = try? JSONDecoder().decode(Receipt.self, from: reply.body) else {
                throw RemoteReactorError.unexpectedResponse(
                    status: reply.status,
                    detail: String(decoding: reply.body.prefix(256), as: UTF8.self))
            }
            return receipt.seq
        }
    }

    /// Whether the server has answered (or the action failed).
    public var isSettled: Bool { answer.isResolved }
}
