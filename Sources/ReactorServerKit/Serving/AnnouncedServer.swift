import ReactorHTTP
import ServiceLifecycle

/// The server as `reactor-server` runs it in its service group: started, announced (the
/// address file, the line on standard output), then served until the group stops it.
struct AnnouncedServer: Service {
    let server: ReactorServer
    let announce: @Sendable (UInt16) throws -> Void

    func run() async throws {
        try server.start()
        do {
            try announce(server.port)
        } catch {
            server.shutdown()
            throw error
        }
        try await server.run()
    }
}
