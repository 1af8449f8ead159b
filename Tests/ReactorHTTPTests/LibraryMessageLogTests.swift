import Locking
import Logging
import Testing

@testable import ReactorHTTP

/// libmicrohttpd's own messages as the service logs them.
@Suite struct LibraryMessageLogTests {
    private let clock = Locked<UInt64>(1_000)

    private func log() -> LibraryMessageLog {
        let clock = self.clock
        return LibraryMessageLog(logger: Logger(label: "test"), now: { clock.withLock { $0 } })
    }

    @Test func aRefusedConnectionIsAWarningAndAClientLeavingIsRoutine() {
        let log = log()
        let refused = log.entry(for: "Server reached connection limit. Closing inbound connection.")
        #expect(refused == .init(level: .warning, message: "Server reached connection limit. Closing inbound connection.", suppressed: 0))
        clock.withLock { $0 += LibraryMessageLog.warningSpacing }
        #expect(log.entry(for: "Error accepting connection: Too many open files")?.level == .warning)
        #expect(
            log.entry(for: "Error processing request (HTTP response code is 400 ('Bad Request')). Closing connection.")?.level == .debug)
        #expect(log.entry(for: "Socket has been disconnected when reading request.")?.level == .debug)
    }

    @Test func warningsAreWrittenOnceASecondAndTheNextCountsThoseLeftOut() {
        let log = log()
        let message = "Server reached connection limit. Closing inbound connection."
        #expect(log.entry(for: message)?.suppressed == 0)
        for _ in 0..<5 {
            clock.withLock { $0 += 100_000_000 }
            #expect(log.entry(for: message) == nil)
        }
        // Routine messages are never held back.
        #expect(log.entry(for: "Socket has been disconnected when reading request.") != nil)
        clock.withLock { $0 += 500_000_000 }
        #expect(log.entry(for: "Error accepting connection: Too many open files")?.suppressed == 5)
        clock.withLock { $0 += LibraryMessageLog.warningSpacing }
        #expect(log.entry(for: message)?.suppressed == 0)
    }

    @Test func anIdInAPathIsReplacedByItsLabelAndAQueryIsLeftOut() {
        let id = "Zx9_-AbCdEfGhIjKlMnOpQ"
        let message = log().entry(for: "Failed to send the response body for the request for `/reactors/\(id)/events'. Error: Broken pipe")
        let label = ReactorService.loggable(path: "/reactors/\(id)").dropFirst("/reactors/".count)
        #expect(message?.message == "Failed to send the response body for the request for `/reactors/\(label)/events'. Error: Broken pipe")
        #expect(message?.message.contains(id) == false)
        #expect(
            LibraryMessageLog.redacted("request for `/reactors/\(id)?access_token=secret' failed")
                == "request for `/reactors/\(label)' failed")
        #expect(LibraryMessageLog.redacted("request for `/types?x=1' at /reactors/") == "request for `/types' at /reactors/")
        // The id's whole segment, as the request log hides it, even when a client encoded it;
        // a sentence's full stop is not part of it.
        let encoded = "%5A" + id.dropFirst()
        let encodedLabel = ReactorService.loggable(path: "/reactors/\(encoded)").dropFirst("/reactors/".count)
        #expect(
            LibraryMessageLog.redacted("Failed to send data in request for /reactors/\(encoded).")
                == "Failed to send data in request for /reactors/\(encodedLabel).")
        #expect(LibraryMessageLog.redacted("for /reactors/\(id).") == "for /reactors/\(label).")
        // A path that names the route in another form, or is a whole URL.
        #expect(
            LibraryMessageLog.redacted("request for `/%72eactors/\(id)' and http://host//reactors/\(id)")
                == "request for `/%72eactors/\(label)' and http://host//reactors/\(label)")
    }
}
