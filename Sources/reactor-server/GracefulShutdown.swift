import Dispatch
import Foundation
import Logging
import Synchronization

/// Turns SIGTERM and SIGINT into one graceful stop, then exits 0. A second signal while
/// stopping exits at once with status 1.
enum GracefulShutdown {
    /// Installs the handlers. Keep the returned sources alive for as long as they should fire.
    static func install(signals: [Int32], logger: Logger,
                        stop: @escaping @Sendable () -> Void) -> [any DispatchSourceSignal] {
        var sources: [any DispatchSourceSignal] = []
        let queue = DispatchQueue(label: "reactor-server.signals")
        let stopping = StopOnce()
        for signalNumber in signals {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
            source.setEventHandler {
                guard stopping.begin() else {
                    logger.warning("second signal while stopping: exiting now")
                    exit(1)
                }
                logger.info("stopping", metadata: ["signal": "\(signalNumber)"])
                DispatchQueue.global().async {
                    stop()
                    exit(0)
                }
            }
            source.resume()
            sources.append(source)
        }
        return sources
    }
}

/// True the first time only.
private final class StopOnce: Sendable {
    private let started = Atomic<Bool>(false)

    func begin() -> Bool {
        !started.exchange(true, ordering: .acquiringAndReleasing)
    }
}

