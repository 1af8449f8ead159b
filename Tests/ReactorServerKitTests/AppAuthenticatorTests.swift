import ReactorServerKit
import Testing

/// What a team's service writes to authenticate in its own way, with `ReactorServerKit` as its
/// only import: the protocol, the request it reads and the failure it throws are all there.
@Suite struct AppAuthenticatorTests {
    struct APIKeys: Authenticator {
        let subjects: [String: String]

        func authenticate(_ request: AuthenticationRequest) throws(AuthenticationFailure) -> String? {
            guard let key = request.token ?? request.header("X-API-Key") else { return nil }
            guard let subject = subjects[key] else { throw AuthenticationFailure("unknown API key") }
            return subject
        }
    }

    struct Service: ReactorServiceApp {
        func register(_ reactors: inout ReactorRegistry, options: NoOptions) {}
        func authenticator(options: NoOptions) -> (any Authenticator)? { APIKeys(subjects: ["k1": "alice"]) }
    }

    @Test func anAppsAuthenticatorIsWhatItReturns() {
        #expect(Service().authenticator(options: NoOptions()) is APIKeys)
        #expect(AuthenticationFailure("unknown API key").description == "unknown API key")
    }
}
