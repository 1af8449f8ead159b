/// A state of a remote instance with its version: versions grow by one per state on the server,
/// and a client sees them in order (some may be skipped, none repeated or reordered).
public struct VersionedState<State: Sendable>: Sendable {
    /// The state's version on the server (the event stream's `id:`).
    public var version: UInt64
    /// The state.
    public var state: State

    /// A state and its version.
    public init(version: UInt64, state: State) {
        self.version = version
        self.state = state
    }
}

extension VersionedState: Equatable where State: Equatable {}

/// `{"id":…,"type":…,"version":…,"state":…}`: what `POST /reactors`, `GET /reactors/{id}` and
/// `POST …/actions?wait=true` answer.
struct InstanceSnapshot<State: Decodable & Sendable>: Decodable, Sendable {
    var id: String
    var type: String
    var version: UInt64
    var state: State

    var versioned: VersionedState<State> { VersionedState(version: version, state: state) }
}
