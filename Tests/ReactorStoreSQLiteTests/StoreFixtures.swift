import Foundation
import ReactorHosting

@testable import ReactorStoreSQLite

/// Writes a closed session store at `path` holding a counter session for each id and value.
func writeStore(at path: String, counters: [(id: String, value: Int)]) throws {
    let store = try SQLiteSessionStore(path: path, historyCapacity: 8)
    _ = try store.commit(
        counters.map { .create(id: $0.id, type: "counter", state: Array(#"{"value":\#($0.value)}"#.utf8), lastActivity: 0) })
    store.close()
}
