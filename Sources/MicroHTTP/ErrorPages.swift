import CMicroHTTPD
import CMicroHTTPDErrorPages
import Locking

/// Puts each server's `errorResponse` in place of the HTML pages libmicrohttpd sends by itself
/// (a header section too large for the connection's memory, a malformed request line, an
/// unsupported HTTP version …), through the `CMicroHTTPDErrorPages` shim.
enum ErrorPages {
    /// The running servers, by bound port. Unretained: the daemons' contexts, held by their
    /// loops, keep their server alive until after the daemons stopped and it left this table.
    private static let servers = Locked<[UInt16: Unmanaged<ServerCore>]>([:])

    /// Installs the builder once per process.
    private static let installed: Void = cmhd_set_error_page_builder(build)

    static func register(port: UInt16, core: Unmanaged<ServerCore>) {
        _ = installed
        servers.withLock { $0[port] = core }
    }

    /// Called once the daemon stopped, so no thread of it can still be looking the server up.
    static func unregister(port: UInt16) {
        _ = servers.withLock { $0.removeValue(forKey: port) }
    }

    /// Runs on libmicrohttpd's threads: a free function, not a closure of any actor.
    private static let build: cmhd_error_page_builder = { port, status, detail in
        guard let core = servers.withLock({ $0[port] }) else { return nil }
        let response = core.takeUnretainedValue().configuration.errorResponse(Int(status), String(cString: detail))
        switch response.kind {
        case .bytes, .prepared: return MHDCallbacks.makeResponse(body: response.body, headers: response.headers)
        case .stream, .deferred: return nil
        }
    }
}
