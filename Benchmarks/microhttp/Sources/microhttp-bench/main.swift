// MicroHTTP answering the same fixed body as c-server.c, on the synchronous fast path.
// Usage: microhttp-bench PORT [THREADS]
import Glibc
import MicroHTTP

let arguments = CommandLine.arguments
var configuration = HTTPServerConfiguration()
configuration.port = arguments.count > 1 ? UInt16(arguments[1]) ?? 8082 : 8082
if arguments.count > 2, let threads = Int(arguments[2]) { configuration.threads = threads }

let server = HTTPServer(configuration: configuration, handler: Bench.handle)
do {
    try server.start()
} catch {
    print("cannot start: \(error)")
    exit(1)
}

var signals = sigset_t()
sigemptyset(&signals)
sigaddset(&signals, SIGTERM)
sigaddset(&signals, SIGINT)
sigprocmask(SIG_BLOCK, &signals, nil)
var received: Int32 = 0
sigwait(&signals, &received)
server.shutdown()
