import CMicroHTTPD
import Glibc
import Synchronization

/// The C callbacks handed to libmicrohttpd. All are nonisolated static functions; their context
/// arrives through `cls` as an unmanaged reference (the calling daemon's ``DaemonContext``).
enum MHDCallbacks {
    static let yes = MHD_Result.YES
    static let no = MHD_Result.NO

    // MARK: Access handler

    static let accessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, version, uploadData, uploadSize, conCls in
        guard let cls, let connection, let conCls, let uploadSize else { return no }
        let daemon = Unmanaged<DaemonContext>.fromOpaque(cls).takeUnretainedValue()
        let core = daemon.core

        guard let existing = conCls.pointee else {
            // First call: headers only. Answering here would force `Connection: close`, so only
            // requests that are refused anyway are answered now.
            if let refusal = refusal(connection: connection, version: version, core: core) {
                return queue(core.configuration.errorResponse(refusal.status, refusal.detail), on: connection, context: nil, daemon: daemon)
            }
            core.requestStarted()
            conCls.pointee = Unmanaged.passRetained(RequestContext()).toOpaque()
            return yes
        }
        let context = Unmanaged<RequestContext>.fromOpaque(existing).takeUnretainedValue()

        if let responder = context.responder {
            // Called again while a deferred reply is held, or resumed after it was suspended.
            if let response = responder.takeResponse() {
                context.responder = nil
                endHold(context, daemon: daemon)
                return queue(response, on: connection, context: context, daemon: daemon)
            }
            if context.heldSince != 0 {
                guard MonotonicClock.preciseNanoseconds() &- context.heldSince >= core.replyHoldNanoseconds else { return yes }
                endHold(context, daemon: daemon)
                if responder.suspendUnlessAnswered() { return yes }
            }
            // Answered just now, or (never expected) resumed without an answer.
            context.responder = nil
            let response = responder.takeResponse() ?? core.configuration.errorResponse(500, "No response")
            return queue(response, on: connection, context: context, daemon: daemon)
        }

        if uploadSize.pointee > 0 {
            let count = uploadSize.pointee
            if !context.bodyTooLarge {
                if context.body.count + count > core.configuration.maxBodySize {
                    context.bodyTooLarge = true
                    context.body = []
                } else if let uploadData {
                    context.body.append(contentsOf: UnsafeRawBufferPointer(start: uploadData, count: count))
                }
            }
            uploadSize.pointee = 0
            return yes
        }

        if context.bodyTooLarge {
            return queue(core.configuration.errorResponse(413, "Request body too large"), on: connection, context: context, daemon: daemon)
        }

        let request = makeRequest(connection: connection, url: url, method: method, body: context.body)
        context.body = []
        return queue(core.handler(request), on: connection, context: context, daemon: daemon)
    }

    /// Requests refused on sight: header section or declared body over the limits, or a body
    /// whose end cannot be told for sure (answered at once, the connection then closed, so no
    /// byte of it can be read as the next request).
    private static func refusal(connection: OpaquePointer, version: UnsafePointer<CChar>?, core: ServerCore)
        -> (status: Int, detail: String)?
    {
        let configuration = core.configuration
        if cmhd_request_header_size(connection) > configuration.maxHeaderSize {
            return (431, "Request header fields too large")
        }
        var lengthValue: UnsafePointer<CChar>?
        var lengthSize = 0
        if let framingRefusal = framingRefusal(cmhd_request_framing(connection, version, &lengthValue, &lengthSize)) {
            return framingRefusal
        }
        if let lengthValue {
            var length = 0
            var digits = 0
            while digits < lengthSize, case let byte = UInt8(bitPattern: lengthValue[digits]), byte >= 0x30, byte <= 0x39 {
                length = length > (Int.max - 9) / 10 ? Int.max : length * 10 + Int(byte - 0x30)
                digits += 1
            }
            // libmicrohttpd does not see a value it cannot read (CMicroHTTPDErrorPages), so every
            // Content-Length that is not 1*DIGIT (RFC 9110 §8.6) is refused here.
            guard digits > 0, digits == lengthSize else {
                return (400, "Content-Length must be the body's length in bytes, in decimal digits only")
            }
            if length > configuration.maxBodySize {
                return (413, "Request body too large")
            }
        }
        return nil
    }

    /// The answer to a request whose framing headers are ambiguous or unsupported (RFC 9112).
    private static func framingRefusal(_ framing: cmhd_framing) -> (status: Int, detail: String)? {
        switch framing {
        case CMHD_FRAMING_CONFLICTING_LENGTHS:
            return (400, "Content-Length is given more than once, with different values")
        case CMHD_FRAMING_LENGTH_WITH_CODING:
            return (400, "Transfer-Encoding and Content-Length are both given: the body's length is ambiguous")
        case CMHD_FRAMING_CHUNKED_NOT_LAST:
            return (400, "Transfer-Encoding must end with chunked, applied once: else the body's length cannot be told")
        case CMHD_FRAMING_UNSUPPORTED_CODING:
            return (501, #"Transfer-Encoding other than "chunked" alone is not supported"#)
        case CMHD_FRAMING_HOST:
            return (400, "An HTTP/1.1 request needs exactly one Host header")
        case CMHD_FRAMING_SPACE_IN_NAME:
            return (400, "Whitespace between a header name and its colon is not allowed")
        case CMHD_FRAMING_FOLDED_LINE:
            return (400, "A header line may not start with a space or a tab (obsolete line folding, RFC 9112 §5.2)")
        default:
            return nil
        }
    }

    private static func makeRequest(connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?, body: [UInt8])
        -> HTTPRequest
    {
        var headers = HTTPHeaders(capacity: Int(MHD_get_connection_values(connection, .HEADER_KIND, nil, nil)))
        _ = withUnsafeMutablePointer(to: &headers) { pointer in
            MHD_get_connection_values(connection, .HEADER_KIND, collectHeader, pointer)
        }
        var query = QueryParameters()
        _ = withUnsafeMutablePointer(to: &query) { pointer in
            MHD_get_connection_values(connection, .GET_ARGUMENT_KIND, collectArgument, pointer)
        }
        var address = sockaddr_in6()
        let client = cmhd_client_address(connection, &address) == 1 ? ClientAddress(address: address) : nil
        return HTTPRequest(
            method: HTTPMethod(rawValue: method.map { String(cString: $0) } ?? "GET"),
            path: url.map { originPath(String(cString: $0)) } ?? "/",
            query: query,
            headers: headers,
            body: body,
            client: client
        )
    }

    /// The path of a request target in absolute form (`http://host/path`, which a server must
    /// accept, RFC 9112 §3.2.2): what follows the authority, `/` if nothing does; any other
    /// target as it is. libmicrohttpd passes the target on without its query, and unchanged.
    static func originPath(_ target: String) -> String {
        guard target.utf8.first != UInt8(ascii: "/") else { return target }
        let lowered = target.prefix(8).lowercased()
        let schemeLength = lowered.hasPrefix("http://") ? 7 : lowered.hasPrefix("https://") ? 8 : 0
        guard schemeLength > 0 else { return target }
        let authorityAndPath = target.dropFirst(schemeLength)
        guard let slash = authorityAndPath.firstIndex(of: "/") else { return "/" }
        return String(authorityAndPath[slash...])
    }

    private static let collectHeader: MHD_KeyValueIterator = { cls, _, key, value in
        guard let cls, let key else { return yes }
        let headers = cls.assumingMemoryBound(to: HTTPHeaders.self)
        headers.pointee.add(String(cString: key), value.map { String(cString: $0) } ?? "")
        return yes
    }

    private static let collectArgument: MHD_KeyValueIterator = { cls, _, key, value in
        guard let cls, let key else { return yes }
        let query = cls.assumingMemoryBound(to: QueryParameters.self)
        let name = PercentDecoding.decodeOrKeep(Substring(String(cString: key)), plusAsSpace: true)
        let decoded = value.map { PercentDecoding.decodeOrKeep(Substring(String(cString: $0)), plusAsSpace: true) }
        query.pointee.add(name, decoded ?? "")
        return yes
    }

    // MARK: Queueing responses

    /// Queues `response` (or suspends for a deferred one). `context` is nil only for refusals on the first call.
    static func queue(_ response: HTTPResponse, on connection: OpaquePointer, context: RequestContext?, daemon: DaemonContext) -> MHD_Result
    {
        let core = daemon.core
        let status = (100...999).contains(response.status) ? UInt32(response.status) : 500
        let mhdResponse: OpaquePointer?
        switch response.kind {
        case .bytes(let body):
            mhdResponse = makeResponse(body: body)
        case .prepared(let prepared):
            // Shared as it is, unless shutdown must add `Connection: close` to this one.
            if !core.isShuttingDown, let shared = prepared.sharedResponse() {
                return MHD_queue_response(connection, status, shared)
            }
            mhdResponse = makeResponse(body: prepared.body)
        case .stream(let source, let heartbeat):
            guard let context else { return no }
            let stream = core.makeStream(
                source: source, heartbeat: heartbeat, connection: ConnectionHandle(raw: connection, waker: daemon.waker),
                hangUps: daemon.hangUps, socket: cmhd_connection_fd(connection))
            context.stream = stream
            mhdResponse = MHD_create_response_from_callback(
                cmhd_size_unknown(), Self.streamBlockSize, streamReader, Unmanaged.passRetained(stream).toOpaque(), streamFree)
        case .deferred(let start):
            guard let context else { return no }
            let responder = core.makeResponder(connection: ConnectionHandle(raw: connection, waker: daemon.waker))
            context.responder = responder
            if core.replyHoldNanoseconds == 0 {
                // Suspend before the responder escapes, so its resume always follows this suspend.
                _ = responder.suspendUnlessAnswered()
            } else {
                // Held, not suspended: libmicrohttpd calls the handler again each time the loop
                // runs until it queues a response, and the reply wakes the loop. Suspending would
                // take the connection out of the daemon's epoll set and put it back (two
                // `epoll_ctl` calls and a `recv` per request), which costs a reply that comes
                // within a commit more than the few calls that find it missing; one held longer
                // than the configuration's `deferredReplyHold` is suspended then.
                context.heldSince = MonotonicClock.preciseNanoseconds()
                daemon.heldReplies.add(1, ordering: .relaxed)
            }
            start(responder)
            return yes
        }
        guard let mhdResponse else { return no }
        add(response.headers, to: mhdResponse)
        if core.isShuttingDown {
            _ = MHD_add_response_header(mhdResponse, "Connection", "close")
        }
        let result = MHD_queue_response(connection, status, mhdResponse)
        MHD_destroy_response(mhdResponse)
        return result
    }

    /// Ends the hold of a deferred reply, if it was held.
    private static func endHold(_ context: RequestContext, daemon: DaemonContext) {
        guard context.heldSince != 0 else { return }
        context.heldSince = 0
        daemon.heldReplies.subtract(1, ordering: .relaxed)
    }

    /// A libmicrohttpd response holding a copy of `body`, with `headers`.
    static func makeResponse(body: [UInt8], headers: HTTPHeaders = HTTPHeaders()) -> OpaquePointer? {
        let response = body.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
        }
        if let response { add(headers, to: response) }
        return response
    }

    static func add(_ headers: HTTPHeaders, to response: OpaquePointer) {
        for (name, value) in headers {
            // Passing a `String` where C takes a pointer copies a short string (`Content-Type`,
            // `ETag`) into a new array on the heap; `withCString` copies it to the stack.
            _ = name.withCString { name in
                value.withCString { value in MHD_add_response_header(response, name, value) }
            }
        }
    }

    // MARK: Streams

    /// libmicrohttpd allocates (and zeroes) a buffer of this size per streamed response; it caps
    /// each read only for HTTP/1.0 clients, which get no chunked encoding.
    static let streamBlockSize = 1024

    static let streamReader: MHD_ContentReaderCallback = { cls, _, buffer, max in
        guard let cls, let buffer else { return cmhd_end_with_error() }
        let stream = Unmanaged<HTTPStream>.fromOpaque(cls).takeUnretainedValue()
        switch stream.read(into: UnsafeMutableRawPointer(buffer), max: max) {
        case .wrote(let count): return count
        case .suspended: return 0
        case .end: return cmhd_end_of_stream()
        case .abort: return cmhd_end_with_error()
        }
    }

    static let streamFree: MHD_ContentReaderFreeCallback = { cls in
        guard let cls else { return }
        Unmanaged<HTTPStream>.fromOpaque(cls).release()
    }

    // MARK: Completion

    static let notifyCompleted: MHD_RequestCompletedCallback = { cls, _, conCls, termination in
        guard let cls, let conCls, let pointer = conCls.pointee else { return }
        conCls.pointee = nil
        let daemon = Unmanaged<DaemonContext>.fromOpaque(cls).takeUnretainedValue()
        let core = daemon.core
        let context = Unmanaged<RequestContext>.fromOpaque(pointer).takeRetainedValue()
        // A connection that ends while its reply is held (the daemon stopping, or its timeout
        // when shorter than the hold): the reply, when it comes, goes nowhere.
        endHold(context, daemon: daemon)
        if let stream = context.stream {
            core.streamClosed(stream, reason: closeReason(termination, shuttingDown: core.isShuttingDown))
        }
        core.requestFinished()
    }

    private static func closeReason(_ termination: MHD_RequestTerminationCode, shuttingDown: Bool) -> HTTPStreamCloseReason {
        switch termination {
        case .REQUEST_TERMINATED_COMPLETED_OK: shuttingDown ? .serverShutdown : .finished
        case .REQUEST_TERMINATED_DAEMON_SHUTDOWN: .serverShutdown
        case .REQUEST_TERMINATED_WITH_ERROR, .REQUEST_TERMINATED_READ_ERROR,
            .REQUEST_TERMINATED_CLIENT_ABORT, .REQUEST_TERMINATED_TIMEOUT_REACHED:
            .clientDisconnected
        default: .error
        }
    }

    // MARK: Messages

    /// Longest message passed on, in bytes; libmicrohttpd's own are under 200, plus a path.
    static let libraryMessageLimit = 512

    /// Formats one of libmicrohttpd's messages and hands it to the configuration's handler,
    /// without its trailing newline. Only set as the logger when there is a handler.
    static let libraryMessage: MHD_LogCallback = { cls, format, arguments in
        guard let cls, let format, let arguments else { return }
        let core = Unmanaged<DaemonContext>.fromOpaque(cls).takeUnretainedValue().core
        guard let handler = core.configuration.libraryMessageHandler else { return }
        let message = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: libraryMessageLimit) { buffer -> String in
            guard let base = buffer.baseAddress else { return "" }
            let length = base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                vsnprintf($0, buffer.count, format, arguments)
            }
            guard length > 0 else { return "" }
            var bytes = UnsafeBufferPointer(rebasing: buffer[..<min(Int(length), buffer.count - 1)])
            while let last = bytes.last, last == 0x0A || last == 0x0D || last == 0x20 {
                bytes = UnsafeBufferPointer(rebasing: bytes.dropLast())
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        if !message.isEmpty { handler(message) }
    }

    // MARK: Panic

    static let panic: MHD_PanicCallback = { _, file, line, reason in
        let where_ = file.map { String(cString: $0) } ?? "?"
        let why = reason.map { String(cString: $0) } ?? "unknown"
        let message = "libmicrohttpd panic at \(where_):\(line): \(why)\n"
        _ = message.withCString { write(2, $0, strlen($0)) }
        abort()
    }
}
