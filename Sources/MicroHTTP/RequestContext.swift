/// Per-request state kept in libmicrohttpd's `con_cls` from the first handler call until the
/// completion callback. Only ever touched on the connection's server thread, one call at a time,
/// so its fields skip the dynamic exclusivity checks (`@exclusivity(unchecked)`).
final class RequestContext {
    @exclusivity(unchecked) var body: [UInt8] = []
    @exclusivity(unchecked) var bodyTooLarge = false
    @exclusivity(unchecked) var responder: HTTPResponder?
    /// When the deferred reply began to be held without suspending the connection (monotonic
    /// nanoseconds); 0 when none is held.
    @exclusivity(unchecked) var heldSince: UInt64 = 0
    @exclusivity(unchecked) var stream: HTTPStream?
}
