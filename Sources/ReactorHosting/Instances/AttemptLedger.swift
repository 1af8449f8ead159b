import Locking

/// The attempts (``RecoveryAttempts``) this process counted in the store: it is alive, so none
/// of those runs ended it. An activation runs such an action again without counting it once
/// more, however often its run could not commit (a full disk drops the instance after each
/// try), and the host takes them back from the store as it stops cleanly
/// (``SessionStore/withdrawAttempts(_:)``), so that the next process does not report as
/// abandoned an action that never ended a process.
package final class AttemptLedger: Sendable {
    private let counted = Locked<[String: Set<UInt64>]>([:])

    package init() {}

    /// Records that this process counted an attempt on action `seq` of session `id`.
    func record(id: String, seq: UInt64) {
        counted.withLock { _ = $0[id, default: []].insert(seq) }
    }

    /// The actions of session `id` whose attempt this process counted.
    func counted(id: String) -> Set<UInt64> {
        counted.withLock { $0[id] ?? [] }
    }

    /// Every attempt this process counted, by session, and forgets them.
    func takeAll() -> [String: [UInt64]] {
        counted.withLock { counted in
            defer { counted = [:] }
            return counted.mapValues { $0.sorted() }
        }
    }
}
