import MicroHTTP

/// The benchmark handler: a nonisolated static function (never a closure in main.swift).
enum Bench {
    static let body = Array(#"{"value":1}"#.utf8)

    @Sendable static func handle(_ request: HTTPRequest) -> HTTPResponse {
        HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: body)
    }
}
