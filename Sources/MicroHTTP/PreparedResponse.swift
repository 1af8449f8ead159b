import CMicroHTTPD
import Synchronization

/// A response sent many times as it is — the same status, headers and body to every request that
/// gets it — such as the current snapshot of a resource that many clients read.
///
/// From its second send on, libmicrohttpd keeps one copy of it and queues that copy on every
/// connection it is sent to; a response built for each request instead costs a copy of the body
/// and of each header per request. The first send builds an ordinary response, so a response
/// sent only once costs no shared copy (about 650 bytes that would otherwise live as long as
/// this object). Send it with ``HTTPResponse/init(_:)``. While the server shuts down, or once
/// the `HTTPResponse` made from it has its status or headers changed, it is sent as an ordinary
/// response built from the same parts.
///
/// libmicrohttpd counts the connections a response is queued on under the response's own mutex
/// (`MHD_queue_response` and `MHD_destroy_response` take it), so worker threads may queue the
/// shared copy at the same time, and `deinit`'s `MHD_destroy_response` frees it only once the
/// last connection is done with it.
public final class PreparedResponse: Sendable {
    /// The status code.
    public let status: Int
    /// The header fields.
    public let headers: HTTPHeaders
    /// The body.
    public let body: [UInt8]
    /// How many times it was asked for the shared copy before there was one.
    private let sends = Atomic<Int>(0)
    /// The address of libmicrohttpd's shared copy, once built; 0 before.
    private let shared = Atomic<UInt>(0)

    /// A response to send as often as asked.
    public init(status: Int, headers: HTTPHeaders, body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    deinit {
        if let response = OpaquePointer(bitPattern: shared.load(ordering: .acquiring)) {
            MHD_destroy_response(response)
        }
    }

    /// Whether libmicrohttpd's shared copy has been built.
    var isShared: Bool { shared.load(ordering: .acquiring) != 0 }

    /// The shared copy to queue for this send; nil for the first send, or if libmicrohttpd could
    /// not build it (out of memory): the caller then sends an ordinary response.
    func sharedResponse() -> OpaquePointer? {
        // Once built, a load is all a send costs: no write to a line both worker threads read.
        if let built = OpaquePointer(bitPattern: shared.load(ordering: .acquiring)) { return built }
        if sends.wrappingAdd(1, ordering: .relaxed).oldValue == 0 { return nil }
        guard let made = MHDCallbacks.makeResponse(body: body, headers: headers) else { return nil }
        let (stored, existing) = shared.compareExchange(
            expected: 0, desired: UInt(bitPattern: Int(bitPattern: made)),
            successOrdering: .acquiringAndReleasing, failureOrdering: .acquiring)
        if stored { return made }
        // Another thread built one first: use that, and drop this one (never queued).
        MHD_destroy_response(made)
        return OpaquePointer(bitPattern: existing)
    }
}
