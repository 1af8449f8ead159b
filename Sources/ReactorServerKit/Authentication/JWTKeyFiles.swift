import Dispatch
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// Keeps a ``JWTAuthenticator``'s keys as their files say, so that keys rotate without a
/// restart: reads the files again when one of them changes (checked every second) or on
/// SIGHUP. A file that cannot be read or holds no usable key is logged, and the keys in use
/// stay. A service of the server's group: it ends when the group stops.
struct JWTKeyFiles: Service {
    let secretFile: String?
    let jwksFile: String?
    let authenticator: JWTAuthenticator
    let logger: Logger

    /// How often the files are looked at.
    static let checkInterval: Duration = .seconds(1)

    func run() async throws {
        let hangUps = HangUps()
        signal(SIGHUP, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "reactor-server.sighup"))
        source.setEventHandler { hangUps.count() }
        source.resume()
        defer { source.cancel() }
        try? await cancelWhenGracefulShutdown {
            var seen = fingerprint()
            var hangUpsSeen = hangUps.received
            while !Task.isCancelled {
                try await Task.sleep(for: Self.checkInterval)
                let now = fingerprint()
                let asked = hangUps.received
                guard now != seen || asked != hangUpsSeen else { continue }
                let why = now != seen ? "a key file changed" : "SIGHUP"
                seen = now
                hangUpsSeen = asked
                do {
                    let keys = try await JWTKeySet.load(secretFile: secretFile, jwksFile: jwksFile)
                    authenticator.replaceKeys(with: keys)
                    logger.notice("token keys read again", metadata: ["keys": "\(keys.count)", "why": "\(why)"])
                } catch {
                    logger.error("token keys not read again; those in use stay: \(error)")
                }
            }
        }
    }

    /// What tells that a key file changed: its inode, size and modification time, for each.
    private func fingerprint() -> [String] {
        [secretFile, jwksFile].compactMap { $0 }.map { path in
            var info = stat()
            guard stat(path, &info) == 0 else { return "\(path): missing" }
            return "\(path): \(info.st_ino) \(info.st_size) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
        }
    }
}

/// SIGHUPs received so far.
private final class HangUps: Sendable {
    private let value = Atomic<Int>(0)
    var received: Int { value.load(ordering: .relaxed) }
    func count() { value.wrappingAdd(1, ordering: .relaxed) }
}
