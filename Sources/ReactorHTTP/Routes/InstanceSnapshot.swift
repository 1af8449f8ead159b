import MicroHTTP
import ReactorHosting

/// `GET /reactors/{id}`'s answer for one version: `{id, state, type, version}` and its ETag,
/// prepared once and sent as it is to every request that reads this version while it is the
/// latest (see ``StateTimeline/latestSnapshot(_:)``).
final class InstanceSnapshot: LatestSnapshot {
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
