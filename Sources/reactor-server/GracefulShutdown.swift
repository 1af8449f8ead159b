import Dispatch
import Foundation
import Logging
import Synchronization

/// Turns SIGTERM and SIGINT into one graceful stop. A second signal while stopping exits at
/// once with status 1.
enum GracefulShutdown {
    /// Installs the handlers; the first signal runs `stop` on another thread. Call
    /// ``Handlers/waitUntilStopped()`` on the returned handlers to block until `stop` returned.
    static func install(signals: [Int32], logger: Logger,
                        stop: @escaping @Sendable () -> Void) -> Handlers {
        let queue = DispatchQueue(label: "reactor-server.signals")
        let stopping = StopOnce()
        let stopped = DispatchSemaphore(value: 0)
        var sources: [any DispatchSourceSignal] = []
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
                    stopped.signal()
                }
            }
            source.resume()
            sources.append(source)
        }
        return Handlers(sources: sources, stopped: stopped)
    }

    /// The installed signal handlers.
    struct Handlers {
        fileprivate let sources: [any DispatchSourceSignal]
        fileprivate let stopped: DispatchSemaphore

        /// Blocks until a signal's graceful stop has finished, keeping the handlers installed
        /// meanwhile (a second signal still exits at once). The process then exits by returning
        /// from `main`, so everything it holds is released in order.
        func waitUntilStopped() {
            withExtendedLifetime(sources) { stopped.wait() }
        }
    }
}

/// True the first time only.
private final class StopOnce: Sendable {
    private let started = Atomic<Bool>(false)

    func begin() -> Bool {
        !started.exchange(true, ordering: .acquiringAndReleasing)
    }
}
