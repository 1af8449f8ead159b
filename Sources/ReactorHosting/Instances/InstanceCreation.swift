import Foundation

/// What a reactor's factory may read of the request that created its instance, besides its
/// parameters. It is stored with the session, so a factory sees the same context on every
/// activation (after a restart, a passivation, or a move to another node).
public struct CreationContext: Sendable, Codable, Equatable {
    /// The `Idempotency-Key` header of the creating request, if it had one.
    public var idempotencyKey: String?
    /// The address of the client that created the instance, as the server saw it (behind a
    /// proxy, the proxy's).
    public var remoteAddress: String?

    /// The authenticated subject that created the instance (a JSON Web Token's `sub`, or what
    /// the service's `Authenticator` answered): the session's owner, the only subject (besides
    /// an admin) it is served to. Nil when the service authenticates nobody.
    public var subject: String?

    /// Whether the factory is making the reactor of a stored session again (after a restart, a
    /// passivation, or on another node) rather than that of a new one. A check the factory
    /// gained after sessions were created can spare those sessions: a stored session whose
    /// factory throws is refused (`500 stored-session-incompatible`) for as long as it does.
    /// Never stored: false at creation, true at every activation.
    public var isRestoration = false

    // `isRestoration` is not kept with the session.
    private enum CodingKeys: String, CodingKey {
        case idempotencyKey, remoteAddress, subject
    }

    /// A context, created by nobody in particular.
    public init(idempotencyKey: String? = nil, remoteAddress: String? = nil) {
        self.idempotencyKey = idempotencyKey
        self.remoteAddress = remoteAddress
    }

    /// A context of an instance created by `subject`, its owner.
    public init(idempotencyKey: String? = nil, remoteAddress: String? = nil, subject: String?) {
        self.idempotencyKey = idempotencyKey
        self.remoteAddress = remoteAddress
        self.subject = subject
    }
}

/// How an instance was created: the parameters the client sent (`POST /reactors
/// {"type":…,"parameters":{…}}`) and the ``CreationContext``. Stored with the session as JSON,
/// `{"context":{…},"parameters":{…}}`, so that every activation makes the same reactor.
public struct InstanceCreation: Sendable, Equatable {
    /// The parameters' JSON, with sorted keys; nil when the client sent none.
    public var parameters: [UInt8]?
    /// What the factory may read of the creating request.
    public var context: CreationContext

    /// A creation.
    public init(parameters: [UInt8]? = nil, context: CreationContext = CreationContext()) {
        self.parameters = parameters
        self.context = context
    }

    /// Reads a creation from its stored JSON; nil when it is not one.
    public init?(json: [UInt8]) {
        guard let stored = try? JSONDecoder().decode(Stored.self, from: Data(json)) else { return nil }
        self.context = stored.context ?? CreationContext()
        self.parameters = stored.parameters.map { JSONCoding.encodeState($0) }
    }

    /// The JSON the session stores.
    public var json: [UInt8] {
        var object = "{\"context\":".utf8 + JSONCoding.encodeState(context)
        if let parameters { object += ",\"parameters\":".utf8 + parameters }
        object.append(UInt8(ascii: "}"))
        return object
    }

    /// The stored form, for decoding.
    private struct Stored: Decodable {
        var context: CreationContext?
        var parameters: JSONValue?
    }
}
