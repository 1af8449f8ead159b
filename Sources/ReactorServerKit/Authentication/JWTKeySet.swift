import Foundation
import JWTKit
import ReactorHTTP

/// The keys tokens are verified with, read from files: an HS256 secret (`--jwt-secret-file`),
/// and the keys of a JSON Web Key Set (`--jwks-file`: RS256, ES256, EdDSA, …, each with its
/// `kid`). Made anew whenever the files change (see ``JWTKeyFiles``).
struct JWTKeySet: Sendable {
    /// The keys of the set file, by `kid`.
    private var identified: [String: any JWTAlgorithm] = [:]
    /// The HS256 secret.
    private var secret: (any JWTAlgorithm)?

    /// How many keys the set holds.
    var count: Int { identified.count + (secret == nil ? 0 : 1) }

    /// The key a token whose header names `kid` is checked with; one that names none is checked
    /// with the secret, or with the key set's only key.
    func algorithm(for kid: String?) throws(AuthenticationFailure) -> any JWTAlgorithm {
        if let kid {
            guard let key = identified[kid] else {
                throw AuthenticationFailure("the token's key (kid) is not one of the server's keys")
            }
            return key
        }
        guard let key = secret ?? (identified.count == 1 ? identified.values.first : nil) else {
            throw AuthenticationFailure("the token names no key (kid), and the server has several")
        }
        return key
    }

    /// Reads the keys: the secret file's contents (without a trailing line break) as an HS256
    /// key, and each key of the JWKS file. Throws, naming the file, when one cannot be read or
    /// holds no usable key.
    static func load(secretFile: String?, jwksFile: String?) async throws -> JWTKeySet {
        var set = JWTKeySet()
        if let secretFile {
            let secret = try Self.read(secretFile)
            var bytes = Array(secret)
            while let last = bytes.last, last == 0x0A || last == 0x0D { bytes.removeLast() }
            guard bytes.count >= 32 else {
                throw JWTKeyFileError("\(secretFile): an HS256 secret needs at least 32 bytes, it has \(bytes.count)")
            }
            let keys = await JWTKeyCollection().add(hmac: HMACKey(from: bytes), digestAlgorithm: .sha256)
            set.secret = try await keys.getKey()
        }
        if let jwksFile {
            let json = try Self.read(jwksFile)
            let jwks: JWKS
            do {
                jwks = try JSONDecoder().decode(JWKS.self, from: json)
            } catch {
                throw JWTKeyFileError("\(jwksFile) is not a JSON Web Key Set: \(error)")
            }
            for jwk in jwks.keys {
                guard let kid = jwk.keyIdentifier?.string else { throw JWTKeyFileError("\(jwksFile): a key has no kid") }
                do {
                    let keys = try await JWTKeyCollection().add(jwk: jwk)
                    set.identified[kid] = try await keys.getKey(
                        for: jwk.keyIdentifier, alg: jwk.algorithm?.rawValue ?? defaultAlgorithm(jwk))
                } catch {
                    throw JWTKeyFileError("\(jwksFile): the key '\(kid)' is not usable: \(error)")
                }
            }
        }
        guard set.count > 0 else {
            throw JWTKeyFileError("no key to verify tokens with: give --jwt-secret-file or a --jwks-file with keys")
        }
        return set
    }

    /// The algorithm of a key whose JWK names none, from its type and curve.
    private static func defaultAlgorithm(_ jwk: JWK) -> String? {
        switch (jwk.keyType, jwk.curve?.rawValue) {
        case (.rsa, _): return "RS256"
        case (.ecdsa, "P-384"): return "ES384"
        case (.ecdsa, "P-521"): return "ES512"
        case (.ecdsa, _): return "ES256"
        case (.octetKeyPair, _): return "EdDSA"
        default: return nil
        }
    }

    private static func read(_ path: String) throws -> Data {
        do {
            return try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw JWTKeyFileError("cannot read \(path): \(error.localizedDescription)")
        }
    }
}

/// A key file that cannot be used, named with what is wrong.
struct JWTKeyFileError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
