import ReactorHosting
import SortedJSON

/// Frames server-sent events (the `text/event-stream` format).
enum ServerSentEvents {
    /// `retry:` hint sent first: how long a client waits before reconnecting, in milliseconds.
    static func retry(milliseconds: Int) -> [UInt8] {
        Array("retry: \(milliseconds)\n\n".utf8)
    }

    /// A heartbeat comment; it keeps proxies from closing an idle stream and lets the server
    /// notice a client that vanished without closing its connection.
    static let heartbeat: [UInt8] = Array(": heartbeat\n\n".utf8)

    /// The comment line that marks a state skipping versions (conflated, or resumed from a
    /// `Last-Event-ID` the history no longer holds). Clients that read comments see the jump
    /// explicitly; others see it from the versions, which grow by one per state.
    static let snapshotMarker: [UInt8] = Array(": snapshot\n".utf8)
    /// The last bytes of a stream whose credentials expired: a comment, so that the stream ends
    /// as a dropped connection does, and its client reconnects (with `Last-Event-ID`) and
    /// authenticates anew. (`event: end` would tell it the instance is gone.)
    static let credentialsExpired: [UInt8] = Array(
        ": the credentials this stream was opened with have expired; reconnect with new ones\n\n".utf8)

    /// `id: <version>` / `event: state` / `data: <json>`: a state's event, built once per version
    /// and kept with it, so in one buffer of its final size.
    static func stateEvent(version: UInt64, json: [UInt8]) -> [UInt8] {
        let head = "id: ".utf8
        let middle = "\nevent: state\ndata: ".utf8
        var bytes: [UInt8] = []
        bytes.reserveCapacity(head.count + JSONText.decimalDigitCount(of: version) + middle.count + json.count + 2)
        bytes.append(contentsOf: head)
        JSONText.appendInteger(version, to: &bytes)
        bytes.append(contentsOf: middle)
        bytes.append(contentsOf: json)
        bytes.append(0x0A)
        bytes.append(0x0A)
        return bytes
    }

    /// `id: <version>` / `event: patch` / `data: <RFC 6902 patch>`: a version as the patch from
    /// the one before it.
    static func patchEvent(version: UInt64, patch: [UInt8]) -> [UInt8] {
        var bytes = Array("id: ".utf8)
        bytes.reserveCapacity(32 + patch.count)
        JSONText.appendInteger(version, to: &bytes)
        bytes.append(contentsOf: "\nevent: patch\ndata: ".utf8)
        bytes.append(contentsOf: patch)
        bytes.append(contentsOf: [0x0A, 0x0A])
        return bytes
    }

    /// The state's event, framed once per version and shared by every stream that sends it.
    static func stateEvent(_ state: any VersionedState) -> [UInt8] {
        state.framed(by: stateEvent(version:json:))
    }

    /// A state's ``stateEvent(version:json:)``, preceded by ``snapshotMarker`` when
    /// `previous` (the version the client last had) is not `version - 1`.
    static func appendState(_ state: any VersionedState, after previous: UInt64? = nil, to bytes: inout [UInt8]) {
        if isSnapshot(state, after: previous) { bytes.append(contentsOf: snapshotMarker) }
        bytes.append(contentsOf: stateEvent(state))
    }

    /// Whether sending `state` to a client that last had `previous` skips versions.
    static func isSnapshot(_ state: any VersionedState, after previous: UInt64?) -> Bool {
        guard let previous else { return false }
        return state.version > previous &+ 1
    }

    /// An event with a name and single-line JSON data, without an id.
    static func event(_ name: String, json: [UInt8]) -> [UInt8] {
        var bytes = Array("event: \(name)\ndata: ".utf8)
        bytes.append(contentsOf: json)
        bytes.append(contentsOf: [0x0A, 0x0A])
        return bytes
    }

    /// `event: rewound` `{"lastEventId":…,"version":…}`: the client resumed after a version the
    /// instance does not have (a backup restored in place of a lost store rolled it back;
    /// otherwise versions shown and lost are never reused, see `StoredSession.publishedAhead` and
    /// `StoredSession.shownThrough`). Its state from that version on is not the instance's: the state event
    /// that follows replaces it, though its version is lower.
    static func rewound(lastEventID: UInt64, version: UInt64) -> [UInt8] {
        var object = JSONObjectWriter()
        object.add("lastEventId", raw: String(lastEventID))
        object.add("version", raw: String(version))
        return event("rewound", json: object.finish())
    }

    /// `event: end` with the reason the stream ends, the last event a stream sends.
    static func end(_ reason: StreamEndReason) -> [UInt8] {
        var object = JSONObjectWriter()
        object.add("reason", string: reason.rawValue)
        return event("end", json: object.finish())
    }
}
