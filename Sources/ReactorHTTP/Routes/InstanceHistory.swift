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
        object.add("actions", json: array(history.actions.map(actionJSON)))
        object.add("id", string: id)
        object.add("type", string: type)
        object.add("version", raw: String(latest))
        object.add("versions", json: array(history.versions.map { versionJSON($0.state, origin: $0.origin) }))
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
              let data = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys, .withoutEscapingSlashes])
        else { return nil }
        return Array(data)
    }

    private static func array(_ elements: [[UInt8]]) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(ascii: "[")]
        for (index, element) in elements.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: element)
        }
        bytes.append(UInt8(ascii: "]"))
        return bytes
    }

    /// `"2026-11-25T15:20:01.123Z"` for milliseconds since 1970, as a JSON string.
    static func timestamp(_ milliseconds: Int64) -> [UInt8] {
        Array("\"\(RFC3339.format(milliseconds: milliseconds))\"".utf8)
    }
}

/// RFC 3339 timestamps in UTC with milliseconds, without Foundation's formatters.
enum RFC3339 {
    /// Times before 1970 (a clock never set) are shown as 1970-01-01T00:00:00.000Z.
    static func format(milliseconds: Int64) -> String {
        let (seconds, milli) = max(0, milliseconds).quotientAndRemainder(dividingBy: 1000)
        let (days, secondsOfDay) = seconds.quotientAndRemainder(dividingBy: 86_400)
        let (year, month, day) = civilDate(daysSince1970: days)
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondsOfDay / 3600, 2)):\(pad(secondsOfDay / 60 % 60, 2)):\(pad(secondsOfDay % 60, 2)).\(pad(milli, 3))Z"
    }

    /// The Gregorian date of a day counted from 1970-01-01 (not before it), by Howard Hinnant's
    /// days-to-civil algorithm.
    static func civilDate(daysSince1970 days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468
        let era = shifted / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
