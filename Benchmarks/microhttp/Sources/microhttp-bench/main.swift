// MicroHTTP answering the same fixed body as c-server.c, on the synchronous fast path.
// Usage: microhttp-bench PORT [THREADS] [--streams]
// With --streams, GET /events is also an event stream and every subscriber receives a broadcast
// of the monotonic clock (nanoseconds) every 100 ms, for the idle-streams benchmark.
import Glibc
import MicroHTTP

let arguments = CommandLine.arguments
var configuration = HTTPServerConfiguration()
configuration.port = arguments.count > 1 ? UInt16(arguments[1]) ?? 8082 : 8082
if arguments.count > 2, let threads = Int(arguments[2]), threads > 0 { configuration.threads = threads }
let streams = arguments.contains("--streams")
if streams {
    configuration.connectionMemoryLimit = 8 * 1024
    configuration.maxHeaderSize = 4 * 1024
}

let server = HTTPServer(configuration: configuration, handler: streams ? Broadcast.handle : Bench.handle)
do {
    try server.start()
} catch {
    print("cannot start: \(error)")
    exit(1)
}
if streams { Broadcast.startTicking() }

var signals = sigset_t()
sigemptyset(&signals)
sigaddset(&signals, SIGTERM)
sigaddset(&signals, SIGINT)
sigprocmask(SIG_BLOCK, &signals, nil)
var received: Int32 = 0
sigwait(&signals, &received)
server.shutdown()
