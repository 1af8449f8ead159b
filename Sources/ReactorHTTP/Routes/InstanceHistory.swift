import Foundation
import ReactorHosting
import SortedJSON

/// `GET /reactors/{id}/history`'s body: the kept versions, each with the action that produced it,
/// and the recent actions.
///
/// ```json
/// {"actions":[{"action":"increase","at":"2026-11-25T15:20:01.120Z","seq":1}],
///  "id":"…","type":"counter","version":3,
///  "versions":[{"at":null,"seq":null,"state":{…},"version":0}, …]}
/// ```
enum InstanceHistory {
    static func body(id: String, type: String, history: TimelineHistory, latest: UInt64) -> [UInt8] {
        var object = JSONObjectWriter(capacity: 1024)
        object.add("actions", json: JSONText.array(history.actions.map(actionJSON)))
        object.add("id", string: id)
        object.add("type", string: type)
        object.add("version", raw: String(latest))
        object.add("versions", json: JSONText.array(history.versions.map { versionJSON($0.state, origin: $0.origin) }))
        return object.finish()
    }

    private static func actionJSON(_ record: ActionRecord) -> [UInt8] {
        var object = JSONObjectWriter()
        object.add("action", json: record.json.flatMap(canonical) ?? Array("null".utf8))
        object.add("at", json: timestamp(record.acceptedAt))
        object.add("seq", raw: String(record.seq))
        return object.finish()
    }

    private static func versionJSON(_ state: any VersionedState, origin: VersionOrigin?) -> [UInt8] {
        var object = JSONObjectWriter(capacity: state.json.count + 96)
        object.add("at", json: origin?.publishedAt.map(timestamp) ?? Array("null".utf8))
        let producedBy = origin.map(\.producedBy) ?? 0
        object.add("seq", raw: producedBy == 0 ? "null" : String(producedBy))
        object.add("state", json: state.json)
        object.add("version", raw: String(state.version))
        return object.finish()
    }

    /// The action as it was sent, re-encoded compactly with sorted keys; nil if it is not JSON
    /// (it always is: it was decoded before it was accepted).
    private static func canonical(_ json: [UInt8]) -> [UInt8]? {
        guard let value = try? JSONSerialization.jsonObject(with: Data(json), options: [.fragmentsAllowed]),
            let data = try? JSONSerialization.data(
                withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys, .withoutEscapingSlashes])
        else { return nil }
        return Array(data)
    }

    /// `"2026-11-25T15:20:01.123Z"` for milliseconds since 1970, as a JSON string.
    static func timestamp(_ milliseconds: Int64) -> [UInt8] {
        Array("\"\(RFC3339.format(milliseconds: milliseconds))\"".utf8)
    }
}

/// RFC 3339 timestamps in UTC with milliseconds, without Foundation's formatters: the history's
/// times, and the JSON log lines' of `reactor-server`.
package enum RFC3339 {
    /// `2026-11-25T15:20:01.123Z` for milliseconds since 1970; times before 1970 (a clock never
    /// set) are shown as 1970-01-01T00:00:00.000Z.
    package static func format(milliseconds: Int64) -> String {
        let (wholeSeconds, milli) = max(0, milliseconds).quotientAndRemainder(dividingBy: 1000)
        var seconds = time_t(wholeSeconds)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: some BinaryInteger, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(milli, 3))Z"
    }

    /// Now, formatted.
    package static func now() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return format(milliseconds: Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec / 1_000_000))
    }
}
