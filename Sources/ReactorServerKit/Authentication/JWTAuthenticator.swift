import Foundation
import JWTKit
import Locking
import ReactorHTTP
import ReactorHosting

/// `--auth jwt`: verifies the bearer token of each request as a JSON Web Token signed by one of
/// the keys of a ``JWTKeySet`` (jwt-kit's algorithms), and answers its `sub` as the subject.
///
/// A token is refused unless its header names the algorithm of the key it is checked with (a
/// token cannot choose a weaker one, nor `none`), it has not expired (`exp`, required) and is
/// valid already (`nbf`), both within the leeway, and it names the audience and issuer when
/// they are configured. Verification is synchronous (jwt-kit's algorithms are), so it runs on
/// the thread that serves the request; the keys are swapped whole when their files change.
final class JWTAuthenticator: Authenticator {
    /// What a token must say besides its signature.
    struct Requirements: Sendable {
        /// The `aud` a token must include; nil: any.
        var audience: String?
        /// The `iss` a token must carry; nil: any.
        var issuer: String?
        /// How far `exp` and `nbf` may be off the server's clock.
        var leeway: Duration = .seconds(60)
    }

    private let keys: Locked<JWTKeySet>
    private let requirements: Requirements
    private let now: @Sendable () -> Date

    init(keys: JWTKeySet, requirements: Requirements, now: @escaping @Sendable () -> Date = { Date() }) {
        self.keys = Locked(keys)
        self.requirements = requirements
        self.now = now
    }

    /// Verifies with `keys` from now on (their files changed).
    func replaceKeys(with keys: JWTKeySet) {
        self.keys.withLock { $0 = keys }
    }

    /// The claims read from a token; verified here, not by jwt-kit's asynchronous `verify`.
    struct Claims: JWTPayload {
        var sub: SubjectClaim?
        var exp: ExpirationClaim?
        var nbf: NotBeforeClaim?
        var aud: AudienceClaim?
        var iss: IssuerClaim?

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    func authenticate(_ request: AuthenticationRequest) throws(AuthenticationFailure) -> String? {
        guard let token = request.token else { return nil }
        return try subject(of: token)
    }

    /// The token's `exp` and the leeway: until then ``authenticate(_:)`` accepts it.
    func credentialsExpiry(of request: AuthenticationRequest) -> Date? {
        guard let token = request.token,
            let expiry = (try? DefaultJWTParser().parse(Array(token.utf8), as: Claims.self))?.payload.exp?.value
        else { return nil }
        return expiry.addingTimeInterval(TimeInterval(requirements.leeway.components.seconds))
    }

    /// The subject of a valid token; throws why it is not one.
    func subject(of token: String) throws(AuthenticationFailure) -> String {
        let bytes = Array(token.utf8)
        let parsed: (header: JWTHeader, payload: Claims, signature: Data)
        do {
            parsed = try DefaultJWTParser().parse(bytes, as: Claims.self)
        } catch {
            throw AuthenticationFailure("the token is not a JSON Web Token")
        }
        // RFC 7515 §4.1.11: a token whose `crit` names extensions must be refused by a verifier
        // that understands none of them; a `kid` that is not a string names no key of ours.
        guard parsed.header.crit == nil, parsed.header[dynamicMember: "crit"] == nil else {
            throw AuthenticationFailure("the token's header names critical extensions (crit) this server does not understand")
        }
        guard parsed.header[dynamicMember: "kid"] == nil || parsed.header.kid != nil else {
            throw AuthenticationFailure("the token's key id (kid) is not a string")
        }
        let algorithm = try keys.withLock { keys throws(AuthenticationFailure) in try keys.algorithm(for: parsed.header.kid) }
        guard parsed.header.alg == algorithm.name else {
            throw AuthenticationFailure("the token's algorithm is not its key's (\(algorithm.name))")
        }
        // The signed part: the header and the payload, as sent.
        guard let lastDot = bytes.lastIndex(of: UInt8(ascii: ".")) else {
            throw AuthenticationFailure("the token is not a JSON Web Token")
        }
        let verified: Bool
        do {
            verified = try algorithm.verify(parsed.signature, signs: bytes[..<lastDot])
        } catch {
            verified = false
        }
        guard verified else { throw AuthenticationFailure("the token's signature does not verify") }
        return try check(parsed.payload)
    }

    private func check(_ claims: Claims) throws(AuthenticationFailure) -> String {
        let now = self.now()
        let leeway = TimeInterval(requirements.leeway.components.seconds)
        guard let exp = claims.exp else { throw AuthenticationFailure("the token has no expiry (exp)") }
        do {
            try exp.verifyNotExpired(currentDate: now.addingTimeInterval(-leeway))
        } catch {
            throw AuthenticationFailure("the token has expired")
        }
        if let nbf = claims.nbf {
            do {
                try nbf.verifyNotBefore(currentDate: now.addingTimeInterval(leeway))
            } catch {
                throw AuthenticationFailure("the token is not valid yet (nbf)")
            }
        }
        // Byte for byte, as RFC 7519 §2 compares StringOrURI values (not as `==` compares strings).
        if let audience = requirements.audience, !(claims.aud?.value.contains { $0.hasSameBytes(as: audience) } ?? false) {
            throw AuthenticationFailure("the token is not for this audience")
        }
        if let issuer = requirements.issuer, !(claims.iss?.value.hasSameBytes(as: issuer) ?? false) {
            throw AuthenticationFailure("the token is not from the expected issuer")
        }
        guard let subject = claims.sub?.value, !subject.isEmpty else {
            throw AuthenticationFailure("the token names no subject (sub)")
        }
        return subject
    }
}
