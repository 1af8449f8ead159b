/// Per-request state kept in libmicrohttpd's `con_cls` from the first handler call until the
/// completion callback. Only ever touched on the connection's server thread.
final class RequestContext {
    var body: [UInt8] = []
    var bodyTooLarge = false
    var responder: HTTPResponder?
    var stream: HTTPStream?
}
