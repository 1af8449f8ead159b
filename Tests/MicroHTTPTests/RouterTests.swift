import Testing

@testable import MicroHTTP

@Suite struct RouterTests {
    private func router() -> Router {
        var router = Router()
        router.add(.GET, "/items/{id}") { request in .text("item \(request.pathParameters["id"] ?? "")") }
        router.add(.POST, "/items/{id}/actions") { _ in HTTPResponse(status: 202) }
        router.add(.DELETE, "/items/{id}") { _ in HTTPResponse(status: 204) }
        router.add(.GET, "/static") { _ in .text("static") }
        return router
    }

    @Test func standardMethodsAreTheDeclaredOnesExactly() {
        #expect(HTTPMethod.standard.allSatisfy { $0.isStandard })
        #expect(HTTPMethod.standard.map(\.rawValue) == ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
        #expect(HTTPMethod(rawValue: "GET").isStandard)
        #expect(!HTTPMethod(rawValue: "get").isStandard)  // methods are case-sensitive
        #expect(!HTTPMethod(rawValue: "FOO1").isStandard)
    }

    @Test func matchesParametersPercentDecoded() {
        let response = router().handle(HTTPRequest(method: .GET, target: "/items/a%20b"))
        #expect(response.status == 200)
        #expect(response.body == Array("item a b".utf8))
    }

    @Test func everyParameterIsFoundByNameAndOthersAreNil() {
        var router = Router()
        router.add(.GET, "/a/{first}/b/{second}") { request in
            let names = ["first", "second", "third"].map { request.pathParameters[$0] ?? "nil" }
            return .text(names.joined(separator: ","))
        }
        let response = router.handle(HTTPRequest(method: .GET, target: "/a/x%2Fy/b/%E2%82%AC?q=1"))
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == "x/y,€,nil")
        // A malformed escape is kept as sent.
        let malformed = router.handle(HTTPRequest(method: .GET, target: "/a/%zz/b/2"))
        #expect(String(decoding: malformed.body, as: UTF8.self) == "%zz,2,nil")
        // No route matched: no parameters.
        #expect(HTTPRequest(method: .GET, target: "/a").pathParameters["first"] == nil)
    }

    @Test func literalsMatchByTheirDecodedBytesAndCountSegments() {
        let router = router()
        #expect(router.handle(HTTPRequest(method: .GET, target: "/st%61tic")).status == 200)
        #expect(router.handle(HTTPRequest(method: .GET, target: "/statics")).status == 404)
        #expect(router.handle(HTTPRequest(method: .GET, target: "/static/")).status == 404)
        #expect(router.handle(HTTPRequest(method: .GET, target: "static")).status == 200)
        #expect(router.handle(HTTPRequest(method: .POST, target: "/items/1/actions")).status == 202)
        #expect(router.handle(HTTPRequest(method: .POST, target: "/items/1/actions/2")).status == 404)
        #expect(router.handle(HTTPRequest(method: .POST, target: "/items//actions")).status == 404)
        #expect(router.handle(HTTPRequest(method: .GET, target: "/")).status == 404)
    }

    @Test func unknownPathIs404() {
        #expect(router().handle(HTTPRequest(method: .GET, target: "/nope")).status == 404)
        #expect(router().handle(HTTPRequest(method: .GET, target: "/items/")).status == 404)
    }

    @Test func wrongMethodIs405WithAllow() {
        let response = router().handle(HTTPRequest(method: .PUT, target: "/items/1"))
        #expect(response.status == 405)
        #expect(response.headers["allow"] == "GET, DELETE, HEAD")
    }

    @Test func headUsesGetRoute() {
        let response = router().handle(HTTPRequest(method: .HEAD, target: "/static"))
        #expect(response.status == 200)
    }

    @Test func customBuilders() {
        var router = router()
        router.notFound = { _ in HTTPResponse(status: 404, body: Array("custom".utf8)) }
        router.methodNotAllowed = { _, allowed, pattern in
            HTTPResponse(status: 405, body: Array("\(allowed.count) \(pattern)".utf8))
        }
        #expect(router.handle(HTTPRequest(method: .GET, target: "/x")).body == Array("custom".utf8))
        #expect(router.handle(HTTPRequest(method: .PUT, target: "/static")).body == Array("2 /static".utf8))
        #expect(router.handle(HTTPRequest(method: .PUT, target: "/items/42")).body == Array("3 /items/{id}".utf8))
    }

    @Test func queryDecoding() {
        let request = HTTPRequest(method: .GET, target: "/s?q=a+b%2Bc&x=%zz&x2=%E2%82%AC&empty&dup=1&dup=2")
        #expect(request.query["q"] == "a b+c")
        #expect(request.query["x"] == "%zz")
        #expect(request.query["x2"] == "€")
        #expect(request.query["empty"] == "")
        #expect(request.query["dup"] == "2")
        #expect(request.repeatedQueryNames == ["dup"])
        #expect(HTTPRequest(method: .GET, target: "/s?a=1&b=2").repeatedQueryNames.isEmpty)
    }

    @Test func headersAreCaseInsensitive() {
        var headers: HTTPHeaders = ["Content-Type": "a"]
        headers.add("X-Multi", "1")
        headers.add("x-multi", "2")
        #expect(headers["content-type"] == "a")
        #expect(headers.values(for: "X-MULTI") == ["1", "2"])
        headers["X-Multi"] = "3"
        #expect(headers.values(for: "x-multi") == ["3"])
        headers["content-type"] = nil
        #expect(headers.count == 1)
        // Only letters match across case: `[` and `{`, `@` and a backtick differ by the same bit.
        let symbols: HTTPHeaders = ["X-[": "a", "X-@": "b"]
        #expect(symbols["x-{"] == nil && symbols["X-`"] == nil)
        #expect(symbols["x-["] == "a" && symbols["x-@"] == "b")
    }
}
