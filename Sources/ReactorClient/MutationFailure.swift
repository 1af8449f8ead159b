/// An action's mutations failed on the server (its `event: error`); the instance keeps running.
public struct MutationFailure: Error, Sendable, Equatable, Decodable {
    /// `urn:reactor-server:problem:mutation-failed`.
    public var type: String
    /// `Mutation failed`.
    public var title: String
    /// The error's description.
    public var detail: String
    /// The Swift type of the error the mutations threw.
    public var errorType: String
    /// The sequence number of the action whose mutations failed, when the server knows it.
    public var action: UInt64?
}
