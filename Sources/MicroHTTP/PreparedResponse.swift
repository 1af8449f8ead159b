import CMicroHTTPD

/// A response sent many times as it is — the same status, headers and body to every request that
/// gets it — such as the current snapshot of a resource that many clients read.
///
/// libmicrohttpd keeps one copy of it, built here once, and queues that copy on every connection
/// that is sent it; a response built for one request instead costs a copy of the body and of each
/// header per request. Send it with ``HTTPResponse/init(_:)``. While the server shuts down, or
/// once the `HTTPResponse` made from it has its status or headers changed, it is sent as an
/// ordinary response built from the same parts.
public final class PreparedResponse: @unchecked Sendable {
    // `@unchecked Sendable` is safe: every stored property is a constant, and the libmicrohttpd
    // response is never changed after `init` builds it. libmicrohttpd counts the connections a
    // response is queued on under the response's own mutex (`MHD_queue_response` and
    // `MHD_destroy_response` take it), so worker threads may queue it at the same time, and
    // `deinit`'s `MHD_destroy_response` frees it only once the last connection is done with it.

    /// The status code.
    public let status: Int
    /// The header fields.
    public let headers: HTTPHeaders
    /// The body.
    public let body: [UInt8]
    /// libmicrohttpd's copy; nil if libmicrohttpd could not build it (out of memory).
    let handle: OpaquePointer?

    /// Builds the response once, for sending as often as asked.
    public init(status: Int, headers: HTTPHeaders, body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
        handle = MHDCallbacks.makeResponse(body: body, headers: headers)
    }

    deinit {
        if let handle { MHD_destroy_response(handle) }
    }
}
