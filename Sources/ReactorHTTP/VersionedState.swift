import Locking
import MicroHTTP

/// One published state of an instance with its version, encoded to JSON lazily — at most once,
/// by whichever subscriber or request needs it first — and then shared by all of them.
protocol VersionedState: AnyObject, Sendable {
    /// The state's version on its instance's stream: 0 for the initial state, then +1 per state.
    var version: UInt64 { get }
    /// The state as sorted-key JSON.
    var json: [UInt8] { get }
    /// The state framed as one server-sent event (`id:`, `event: state`, `data:`), built once
    /// and shared by every subscriber that sends it.
    var event: [UInt8] { get }
}

/// `GET /reactors/{id}`'s answer for one version: `{id, state, type, version}` and its ETag,
/// prepared once and sent as it is to every request that reads this version while it is the
/// latest (see ``StateTimeline/latestSnapshot(_:)``).
final class InstanceSnapshot: Sendable {
    /// The state's version.
    let version: UInt64
    /// The version in quotes, as sent in `ETag`.
    let etag: String
    /// `200` with the JSON body, `Content-Type` and `ETag`.
    let response: PreparedResponse

    init(version: UInt64, etag: String, response: PreparedResponse) {
        self.version = version
        self.etag = etag
        self.response = response
    }
}

/// A `VersionedState` over a concrete state type.
final class EncodedOnDemand<State: Encodable & Sendable>: VersionedState {
    let version: UInt64
    private let state: State
    /// Set once, by the first reader that needs the JSON (a `GET`, a stream, a replay); until
    /// then the object is its only allocation.
    private let encoded = SetOnceReference<EncodedState>()

    init(version: UInt64, state: State) {
        self.version = version
        self.state = state
    }

    var json: [UInt8] { bytes.json }

    var event: [UInt8] { bytes.event }

    private var bytes: EncodedState {
        if let bytes = encoded.load() { return bytes }
        // Two racing first readers may both encode; the first to store wins, so every reader
        // sees the same bytes.
        return encoded.storeIfNil(EncodedState(version: version, json: JSONCoding.encodeState(state)))
    }
}

/// A state's JSON and its server-sent event, built together. Not nested in the generic
/// `EncodedOnDemand`, so releasing a state needs no generic metadata lookup.
final class EncodedState: Sendable {
    let json: [UInt8]
    let event: [UInt8]

    init(version: UInt64, json: [UInt8]) {
        self.json = json
        self.event = ServerSentEvents.stateEvent(version: version, json: json)
    }
}
