import Dispatch
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// What the service group's signal handling leaves out: a second SIGTERM or SIGINT while the
/// server stops exits 1 at once. (The first also asks the group to stop, which it does by its
/// own handlers too; asking twice is harmless.)
enum StopSignals {
    static func install(_ signals: [Int32], group: ServiceGroup, logger: Logger) -> [any DispatchSourceSignal] {
        let queue = DispatchQueue(label: "reactor-server.signals")
        let received = SignalCount()
        return signals.map { signalNumber in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
            source.setEventHandler {
                guard received.next() > 1 else {
                    Task { await group.triggerGracefulShutdown() }
                    return
                }
                logger.warning("second signal while stopping: exiting now", metadata: ["signal": "\(signalNumber)"])
                exit(1)
            }
            source.resume()
            return source
        }
    }
}

/// Signals received so far.
private final class SignalCount: Sendable {
    private let count = Atomic<Int>(0)

    /// One more; the count with it.
    func next() -> Int { count.wrappingAdd(1, ordering: .relaxed).newValue }
}
