import Locking

/// Holds each subject to at most ``limit`` sessions, so that one account cannot take every
/// instance a server has: a creation past it is refused with
/// ``HostingError/tooManyInstancesForSubject(limit:)``.
///
/// Without a store it counts each subject's live instances itself. With one, the store counts
/// the subject's committed sessions (every node's, in a shared store), and this counts the
/// creations not committed yet. Admissions take turns, so creations racing in this process
/// cannot pass the limit together; nodes racing each other may, by at most one each.
package final class SubjectQuota: Sendable {
    /// The most sessions one subject may hold.
    package let limit: Int
    /// By subject (its UTF-8 bytes: see ``Swift/String/hasSameBytes(as:)``): the live
    /// instances (without a store), or the creations not committed yet.
    private let counts = Locked<[[UInt8]: Int]>([:])

    package init(limit: Int) {
        self.limit = max(0, limit)
    }

    /// Counts one more session of `subject`, or refuses it when the subject holds its limit.
    /// - Parameter store: the store, which counts the subject's committed sessions; nil: none.
    package func admit(_ subject: String, store: (any SessionStore)?) throws(HostingError) {
        let limit = self.limit
        let key = Array(subject.utf8)
        try counts.withLock { counts throws(HostingError) in
            var held = counts[key, default: 0]
            if let store {
                do throws(SessionStoreError) {
                    held += try store.count(owner: subject)
                } catch {
                    throw HostingError(error)
                }
            }
            guard held < limit else { throw HostingError.tooManyInstancesForSubject(limit: limit) }
            counts[key, default: 0] += 1
        }
    }

    /// Counts one session of `subject` less here: its creation was committed (the store counts
    /// it now) or failed, or, without a store, it ended.
    package func release(_ subject: String) {
        let key = Array(subject.utf8)
        counts.withLock { counts in
            let left = counts[key, default: 0] - 1
            counts[key] = left > 0 ? left : nil
        }
    }
}
