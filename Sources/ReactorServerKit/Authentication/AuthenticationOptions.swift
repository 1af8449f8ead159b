import ArgumentParser
import Foundation
import Logging
import ReactorHTTP

/// `serve`'s options on who may use the service: off by default (each session's id is its only
/// credential); `--auth jwt` verifies JSON Web Tokens; `--auth app` asks the app's own
/// ``ReactorServiceApp/authenticator(options:)``.
struct AuthenticationOptions: ParsableArguments {
    @Option(
        help:
            "Who may use the service: none, anybody who has a session's id; jwt, the subject of a JSON Web Token (Authorization: Bearer); app, the app's own authenticator (default when it has one) (AUTH)."
    )
    var auth: String = ServiceEnvironment.string("AUTH", default: "")

    @Option(help: "With --auth jwt, a file holding the HS256 secret tokens are signed with, at least 32 bytes (JWT_SECRET_FILE).")
    var jwtSecretFile: String = ServiceEnvironment.string("JWT_SECRET_FILE", default: "")

    @Option(
        help:
            "With --auth jwt, a JSON Web Key Set file of the keys tokens are signed with (RS256, ES256, EdDSA…, chosen by kid); read again when it changes or on SIGHUP, so keys rotate without a restart (JWKS_FILE)."
    )
    var jwksFile: String = ServiceEnvironment.string("JWKS_FILE", default: "")

    @Option(help: "With --auth jwt, the audience (aud) a token must name (JWT_AUDIENCE).")
    var jwtAudience: String = ServiceEnvironment.string("JWT_AUDIENCE", default: "")

    @Option(help: "With --auth jwt, the issuer (iss) a token must name (JWT_ISSUER).")
    var jwtIssuer: String = ServiceEnvironment.string("JWT_ISSUER", default: "")

    @Option(parsing: .unconditional, help: "With --auth jwt, seconds exp and nbf may be off this server's clock (JWT_LEEWAY_S).")
    var jwtLeewayS: Int = ServiceEnvironment.value("JWT_LEEWAY_S", default: 60)

    @Option(
        help:
            "A cookie that carries the token too, for a browser's EventSource, which cannot send an Authorization header (AUTH_COOKIE)."
    )
    var authCookie: String = ServiceEnvironment.string("AUTH_COOKIE", default: "")

    // With its inversion, so that AUTH_QUERY_TOKEN=1 can make true the default.
    @Flag(
        inversion: .prefixedNo,
        help:
            "Also take the token from ?access_token= (for clients that can set neither a header nor a cookie); a URL is kept in more places than a header, and this server never logs it (AUTH_QUERY_TOKEN)."
    )
    var authQueryToken: Bool = ServiceEnvironment.value("AUTH_QUERY_TOKEN", default: false)

    @Option(
        parsing: .singleValue,
        help: "A subject with admin rights: /metrics, history, every session; repeat it for more (ADMIN_SUBJECTS, comma-separated)."
    )
    var adminSubject: [String] = ServiceEnvironment.string("ADMIN_SUBJECTS", default: "").split(separator: ",").map {
        String($0).trimmingCharacters(in: .whitespaces)
    }.filter { !$0.isEmpty }

    @Option(
        help:
            "A file holding a token that grants admin rights by itself, such as the one Prometheus scrapes /metrics with (ADMIN_TOKEN_FILE)."
    )
    var adminTokenFile: String = ServiceEnvironment.string("ADMIN_TOKEN_FILE", default: "")

    @Option(
        parsing: .unconditional, help: "Most sessions one subject may hold, one more answers 429; 0: no limit (MAX_INSTANCES_PER_SUBJECT).")
    var maxInstancesPerSubject: Int = ServiceEnvironment.value("MAX_INSTANCES_PER_SUBJECT", default: 0)

    /// The mode in force: the flag's, else `app` when the app has an authenticator, else `none`.
    func mode(appHasAuthenticator: Bool) -> String {
        auth.isEmpty ? (appHasAuthenticator ? "app" : "none") : auth.lowercased()
    }

    func validate() throws {
        guard auth.isEmpty || ["none", "jwt", "app"].contains(auth.lowercased()) else {
            throw ValidationError("\(ServiceEnvironment.setting("auth")) must be none, jwt or app, not '\(auth)'")
        }
        if auth.lowercased() == "jwt" && jwtSecretFile.isEmpty && jwksFile.isEmpty {
            throw ValidationError(
                "\(ServiceEnvironment.setting("auth")) jwt needs the keys tokens are signed with: \(ServiceEnvironment.setting("jwt-secret-file")) or \(ServiceEnvironment.setting("jwks-file"))"
            )
        }
        if jwtLeewayS < 0 {
            throw ValidationError("\(ServiceEnvironment.setting("jwt-leeway-s")) must not be negative, not \(jwtLeewayS)")
        }
        if maxInstancesPerSubject < 0 {
            throw ValidationError(
                "\(ServiceEnvironment.setting("max-instances-per-subject")) must not be negative, not \(maxInstancesPerSubject)")
        }
    }

    /// The JWT authenticator the options describe, with its keys read.
    func makeJWTAuthenticator() async throws -> JWTAuthenticator {
        let keys = try await JWTKeySet.load(secretFile: Self.nonEmpty(jwtSecretFile), jwksFile: Self.nonEmpty(jwksFile))
        return JWTAuthenticator(
            keys: keys,
            requirements: .init(
                audience: Self.nonEmpty(jwtAudience), issuer: Self.nonEmpty(jwtIssuer), leeway: .seconds(jwtLeewayS)))
    }

    /// The service's authentication with `authenticator`: the cookie, the query token, the
    /// admins (reading the admin token's file).
    func configuration(with authenticator: any Authenticator) throws -> AuthenticationConfiguration {
        var configuration = AuthenticationConfiguration(authenticator: authenticator)
        configuration.cookieName = Self.nonEmpty(authCookie)
        configuration.acceptsQueryToken = authQueryToken
        configuration.adminSubjects = Set(adminSubject)
        if let file = Self.nonEmpty(adminTokenFile) {
            let token: String
            do {
                token = try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            } catch {
                throw JWTKeyFileError("cannot read the admin token file \(file): \(error.localizedDescription)")
            }
            guard token.utf8.count >= 16 else {
                throw JWTKeyFileError("\(file): an admin token needs at least 16 characters, it has \(token.utf8.count)")
            }
            configuration.adminToken = token
        }
        return configuration
    }

    static func nonEmpty(_ value: String) -> String? { value.isEmpty ? nil : value }
}

extension AuthenticationOptions {
    /// The service's authentication as the options and the app say, with the service that
    /// keeps a JWT authenticator's keys as their files say; nil for `--auth none`.
    func configure(appAuthenticator: (any Authenticator)?, logger: Logger) async throws -> (
        AuthenticationConfiguration?, JWTKeyFiles?
    ) {
        switch mode(appHasAuthenticator: appAuthenticator != nil) {
        case "jwt":
            let authenticator = try await makeJWTAuthenticator()
            let files = JWTKeyFiles(
                secretFile: Self.nonEmpty(jwtSecretFile), jwksFile: Self.nonEmpty(jwksFile), authenticator: authenticator,
                logger: logger)
            logger.info("callers authenticated by JSON Web Tokens", metadata: ["admins": "\(adminSubject.count)"])
            return (try configuration(with: authenticator), files)
        case "app":
            guard let appAuthenticator else {
                throw ValidationError(
                    "--auth app: this service has no authenticator of its own (ReactorServiceApp.authenticator(options:))")
            }
            logger.info("callers authenticated by the service's own authenticator", metadata: ["admins": "\(adminSubject.count)"])
            return (try configuration(with: appAuthenticator), nil)
        default:
            return (nil, nil)
        }
    }
}
