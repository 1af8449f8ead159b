import Foundation
import JWTKit
import MicroHTTP
import Testing

@testable import ReactorHTTP
@testable import ReactorServerKit

/// `--auth jwt`'s verification, on tokens jwt-kit signs, with the clock injected: what a token
/// must say besides its signature, and keys replaced while serving.
@Suite struct JWTAuthenticatorTests {
    /// Long enough for HS384 too (jwt-kit asserts a key at least as long as the hash).
    static let secret = Array("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".utf8)
    static let now = Date(timeIntervalSince1970: 2_000_000_000)

    /// The claims the authenticator reads, as the tests sign them.
    typealias Payload = JWTAuthenticator.Claims

    static func payload(
        sub: String? = "alice", exp: TimeInterval? = 300, nbf: TimeInterval? = nil, aud: String? = "api",
        iss: String? = "issuer"
    ) -> Payload {
        Payload(
            sub: sub.map { SubjectClaim(value: $0) }, exp: exp.map { ExpirationClaim(value: now.addingTimeInterval($0)) },
            nbf: nbf.map { NotBeforeClaim(value: now.addingTimeInterval($0)) }, aud: aud.map { AudienceClaim(value: [$0]) },
            iss: iss.map { IssuerClaim(value: $0) })
    }

    static func sign(
        _ payload: Payload, secret: [UInt8] = secret, digest: DigestAlgorithm = .sha256, kid: String? = nil,
        header: JWTHeader = JWTHeader()
    ) async throws -> String {
        let keys = await JWTKeyCollection().add(
            hmac: HMACKey(from: secret), digestAlgorithm: digest, kid: kid.map { JWKIdentifier(string: $0) })
        return try await keys.sign(payload, kid: kid.map { JWKIdentifier(string: $0) }, header: header)
    }

    static func authenticator(
        leeway: Duration = .seconds(60), audience: String = "api", issuer: String = "issuer"
    ) async throws -> JWTAuthenticator {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UInt64.random(in: 0...UInt64.max))")
        try Data(secret + [0x0A]).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let keys = try await JWTKeySet.load(secretFile: file.path, jwksFile: nil)
        return JWTAuthenticator(
            keys: keys, requirements: .init(audience: audience, issuer: issuer, leeway: leeway), now: { now })
    }

    static func refusal(_ token: String, by authenticator: JWTAuthenticator) -> String? {
        do {
            _ = try authenticator.subject(of: token)
            return nil
        } catch {
            return error.reason
        }
    }

    @Test func aValidTokensSubjectIsTheCaller() async throws {
        let authenticator = try await Self.authenticator()
        #expect(try authenticator.subject(of: try await Self.sign(Self.payload())) == "alice")
    }

    @Test func expiryAndNotBeforeHoldWithinTheLeewayOnly() async throws {
        let authenticator = try await Self.authenticator(leeway: .seconds(30))
        #expect(Self.refusal(try await Self.sign(Self.payload(exp: -29)), by: authenticator) == nil)
        #expect(Self.refusal(try await Self.sign(Self.payload(exp: -31)), by: authenticator) == "the token has expired")
        #expect(Self.refusal(try await Self.sign(Self.payload(exp: nil)), by: authenticator) == "the token has no expiry (exp)")
        #expect(Self.refusal(try await Self.sign(Self.payload(nbf: 29)), by: authenticator) == nil)
        #expect(Self.refusal(try await Self.sign(Self.payload(nbf: 31)), by: authenticator) == "the token is not valid yet (nbf)")
    }

    @Test func audienceIssuerSubjectAlgorithmAndSignatureAreChecked() async throws {
        let authenticator = try await Self.authenticator()
        let cases: [(Payload, [UInt8], DigestAlgorithm, String)] = [
            (Self.payload(aud: "other"), Self.secret, .sha256, "the token is not for this audience"),
            (Self.payload(aud: nil), Self.secret, .sha256, "the token is not for this audience"),
            (Self.payload(iss: "elsewhere"), Self.secret, .sha256, "the token is not from the expected issuer"),
            (Self.payload(sub: nil), Self.secret, .sha256, "the token names no subject (sub)"),
            (Self.payload(sub: ""), Self.secret, .sha256, "the token names no subject (sub)"),
            (
                Self.payload(), Array("another secret, just as long as the first one is, 64 bytes long".utf8), .sha256,
                "the token's signature does not verify"
            ),
            (Self.payload(), Self.secret, .sha384, "the token's algorithm is not its key's (HS256)"),
        ]
        for (payload, secret, digest, reason) in cases {
            let token = try await Self.sign(payload, secret: secret, digest: digest)
            #expect(Self.refusal(token, by: authenticator) == reason)
        }
        #expect(Self.refusal("not.a.token", by: authenticator) == "the token is not a JSON Web Token")
        #expect(Self.refusal("", by: authenticator) == "the token is not a JSON Web Token")
    }

    @Test func theIssuerAndAudienceAreComparedByteForByte() async throws {
        // "café" with a precomposed é, as configured; a token says it with "e" and a combining accent.
        let authenticator = try await Self.authenticator(audience: "caf\u{E9}", issuer: "\u{212B}ngstr\u{F6}m")
        let exact = Self.payload(aud: "caf\u{E9}", iss: "\u{212B}ngstr\u{F6}m")
        #expect(try authenticator.subject(of: try await Self.sign(exact)) == "alice")
        let audience = Self.payload(aud: "cafe\u{301}", iss: "\u{212B}ngstr\u{F6}m")
        #expect(Self.refusal(try await Self.sign(audience), by: authenticator) == "the token is not for this audience")
        let issuer = Self.payload(aud: "caf\u{E9}", iss: "\u{C5}ngstro\u{308}m")
        #expect(Self.refusal(try await Self.sign(issuer), by: authenticator) == "the token is not from the expected issuer")
    }

    @Test func aCriticalExtensionOrAKeyIDThatIsNotAStringIsRefused() async throws {
        let authenticator = try await Self.authenticator()
        let critical = try await Self.sign(Self.payload(), header: ["crit": .array([.string("b64")]), "b64": .bool(false)])
        #expect(
            Self.refusal(critical, by: authenticator)
                == "the token's header names critical extensions (crit) this server does not understand")
        let numbered = try await Self.sign(Self.payload(), header: ["kid": .int(5)])
        #expect(Self.refusal(numbered, by: authenticator) == "the token's key id (kid) is not a string")
        let listed = try await Self.sign(Self.payload(), header: ["kid": .array([.string("a")])])
        #expect(Self.refusal(listed, by: authenticator) == "the token's key id (kid) is not a string")
    }

    @Test func aTokensCredentialsExpireAtItsExpiryPlusTheLeeway() async throws {
        let authenticator = try await Self.authenticator(leeway: .seconds(30))
        let token = try await Self.sign(Self.payload(exp: 300))
        let request = AuthenticationRequest(HTTPRequest(method: .GET, target: "/reactors/x/events"), token: token)
        #expect(authenticator.credentialsExpiry(of: request) == Self.now.addingTimeInterval(330))
        #expect(authenticator.credentialsExpiry(of: AuthenticationRequest(HTTPRequest(method: .GET, target: "/"), token: nil)) == nil)
    }

    @Test func replacedKeysTakeOverAtOnce() async throws {
        let authenticator = try await Self.authenticator()
        let before = try await Self.sign(Self.payload())
        let other = Array("a rotated secret of thirty-two bytes!".utf8)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("rotated-\(UInt64.random(in: 0...UInt64.max))")
        try Data(other).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        authenticator.replaceKeys(with: try await JWTKeySet.load(secretFile: file.path, jwksFile: nil))
        #expect(Self.refusal(before, by: authenticator) == "the token's signature does not verify")
        #expect(try authenticator.subject(of: try await Self.sign(Self.payload(), secret: other)) == "alice")
    }

    @Test func aShortSecretOrAMissingFileIsRefusedNamingIt() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("short-\(UInt64.random(in: 0...UInt64.max))")
        try Data("too short".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        await #expect { _ = try await JWTKeySet.load(secretFile: file.path, jwksFile: nil) } throws: { error in
            "\(error)".contains("at least 32 bytes") && "\(error)".contains(file.path)
        }
        await #expect { _ = try await JWTKeySet.load(secretFile: nil, jwksFile: "/nonexistent/jwks.json") } throws: { error in
            "\(error)".contains("/nonexistent/jwks.json")
        }
    }
}
