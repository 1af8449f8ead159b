import Locking

/// The `?wait=true` requests not yet answered, each with the answer it gets when the server
/// stops before its action settles: the `202` a request without the wait gets.
///
/// A stop answers them with that acceptance at once (``answerAllAsAccepted()``) rather than
/// leaving them to the HTTP server, which refuses what is still pending when it stops: their
/// actions were accepted, and a client told to try again would have one applied twice.
final class WaitingRequests: Sendable {
    private struct Table {
        var acceptances: [ObjectIdentifier: @Sendable () -> Void] = [:]
        var stopping = false
    }

    private let table = Locked(Table())

    /// Keeps `acceptance`, the answer of the request `reply` answers, until `reply` is sent (it
    /// then calls ``remove(_:)``); when the server is already stopping, calls it at once instead.
    func add(_ reply: ReplyOnce, acceptance: @escaping @Sendable () -> Void) {
        let kept = table.withLock { table -> Bool in
            guard !table.stopping else { return false }
            table.acceptances[ObjectIdentifier(reply)] = acceptance
            return true
        }
        guard kept else { return acceptance() }
        // Sent before it was kept: its removal came first.
        if reply.hasBeenSent { remove(reply) }
    }

    /// Forgets the request `reply` answers, once it is answered.
    func remove(_ reply: ReplyOnce) {
        _ = table.withLock { $0.acceptances.removeValue(forKey: ObjectIdentifier(reply)) }
    }

    /// Answers every waiting request with its acceptance, and each one that comes later at once.
    func answerAllAsAccepted() {
        let acceptances = table.withLock { table in
            table.stopping = true
            defer { table.acceptances = [:] }
            return Array(table.acceptances.values)
        }
        for acceptance in acceptances { acceptance() }
    }
}
