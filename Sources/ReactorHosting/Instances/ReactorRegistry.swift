import Foundation
import Locking
import ReactorCore
import SortedJSON

/// The reactor types a service can create instances of, each under a name.
///
/// ```swift
/// var registry = ReactorRegistry()
/// registry.register("counter", exampleActions: [.increase, .decrease]) { CounterReactor() }
/// ```
/// Any reactor whose `Action` and `State` are Codable can be served this way.
public struct ReactorRegistry: Sendable {
    private var types: [String: RegisteredType] = [:]
    private var order: [String] = []
    private var channels = ClusterChannels { _ in LocalChannel() }

    /// Creates an empty registry.
    public init() {}

    /// A registry whose ``clusterChannel(named:)`` opens channels with `open` (for example
    /// through the database several nodes share).
    package init(channels open: @escaping @Sendable (String) -> any ClusterChannel) {
        channels = ClusterChannels(open: open)
    }

    /// The channel named `name` that carries messages to every process serving these reactors:
    /// how global state (a store every instance merges in `transform(mutation:)`) spans the
    /// nodes. Within one process it is a ``LocalChannel``; served by a service on a shared
    /// PostgreSQL store, it goes through the database, so it reaches every node. The same name
    /// gives the same channel.
    /// - Parameter name: lower-case letters, digits and underscores.
    public func clusterChannel(named name: String) -> any ClusterChannel {
        channels.channel(named: name)
    }

    /// Registers a reactor type under `name`, made without parameters.
    /// - Parameters:
    ///   - name: the name clients use in `POST /reactors {"type": name}`.
    ///   - summary: one line describing the type, shown by `GET /types`.
    ///   - exampleActions: actions shown by `GET /types` as examples of the action JSON.
    ///   - make: creates a fresh reactor for each new instance, and again each time a stored
    ///     session is brought back.
    public mutating func register<R: Reactor>(
        _ name: String,
        summary: String = "",
        exampleActions: [R.Action] = [],
        make: @escaping @Sendable () -> R
    ) {
        add(
            RegisteredType(
                name: name, summary: summary, exampleActions: exampleActions, parameters: nil,
                exampleParameters: nil
            ) { (_: InstanceCreation) throws(HostingError) in make() })
    }

    /// Registers a reactor type under `name`, made without parameters but from the
    /// ``CreationContext`` of the request that created the instance: with authentication on,
    /// its ``CreationContext/subject`` says whose session it is.
    /// ```swift
    /// registry.register("profile") { (context: CreationContext) in
    ///     ProfileReactor(userID: context.subject ?? "guest")
    /// }
    /// ```
    /// An error `make` throws answers `422` (its description is the detail) and creates nothing.
    /// The context is stored with the session: `make` gets the same one whenever the session is
    /// brought back, with ``CreationContext/isRestoration`` then true.
    /// - Parameters:
    ///   - name: the name clients use in `POST /reactors {"type": name}`.
    ///   - summary: one line describing the type, shown by `GET /types`.
    ///   - exampleActions: actions shown by `GET /types` as examples of the action JSON.
    ///   - make: creates the reactor of an instance from its creation context.
    public mutating func register<R: Reactor>(
        _ name: String,
        summary: String = "",
        exampleActions: [R.Action] = [],
        make: @escaping @Sendable (_ context: CreationContext) throws -> R
    ) {
        add(
            RegisteredType(
                name: name, summary: summary, exampleActions: exampleActions, parameters: nil,
                exampleParameters: nil, sharesInitialState: false
            ) { (creation: InstanceCreation) throws(HostingError) in
                do {
                    return try make(creation.context)
                } catch {
                    throw HostingError.invalidParameters("\(error)")
                }
            })
    }

    /// Registers a reactor type under `name` whose instances are created with parameters:
    /// `POST /reactors {"type": name, "parameters": {…}}` decodes them as `Parameters`, and
    /// `make` turns them into the reactor, ReactorKit's `ProfileReactor(userID:)`:
    /// ```swift
    /// struct ProfileParameters: Codable, Sendable { var userID: String }
    /// registry.register("profile") { (parameters: ProfileParameters, context) in
    ///     ProfileReactor(userID: parameters.userID)
    /// }
    /// ```
    /// Parameters that do not decode answer `422` naming the field, and create nothing; so does
    /// an error `make` throws (its description is the detail). The parameters and the context
    /// are stored with the session, and `make` is called with the same ones whenever the session
    /// is brought back (after a restart, a passivation, or on another node), with
    /// ``CreationContext/isRestoration`` then true: a check added later can spare the sessions
    /// made before it.
    /// - Parameters:
    ///   - name: the name clients use in `POST /reactors {"type": name}`.
    ///   - summary: one line describing the type, shown by `GET /types`.
    ///   - exampleActions: actions shown by `GET /types` as examples of the action JSON.
    ///   - exampleParameters: parameters shown by `GET /types`, and with which it shows the
    ///     initial state; without them `GET /types` shows no initial state for this type.
    ///   - make: creates the reactor of an instance from its parameters and creation context.
    public mutating func register<R: Reactor, Parameters: Codable & Sendable>(
        _ name: String,
        summary: String = "",
        exampleActions: [R.Action] = [],
        exampleParameters: Parameters? = nil,
        make: @escaping @Sendable (_ parameters: Parameters, _ context: CreationContext) throws -> R
    ) {
        let exampleJSON = exampleParameters.map { JSONCoding.encodeState($0) }
        add(
            RegisteredType(
                name: name, summary: summary, exampleActions: exampleActions,
                parameters: String(describing: Parameters.self), exampleParameters: exampleJSON
            ) {
                (creation: InstanceCreation) throws(HostingError) in
                let parameters: Parameters
                do {
                    parameters = try JSONCoding.decoder.decode(Parameters.self, from: Data(creation.parameters ?? Array("{}".utf8)))
                } catch let error as DecodingError {
                    throw HostingError.invalidParameters(JSONCoding.describe(error, parsed: true))
                } catch {
                    throw HostingError.invalidParameters("the parameters are not valid JSON")
                }
                do {
                    return try make(parameters, creation.context)
                } catch {
                    throw HostingError.invalidParameters("\(error)")
                }
            })
    }

    private mutating func add(_ type: RegisteredType) {
        precondition(!type.name.isEmpty, "a reactor type needs a name")
        if types[type.name] == nil { order.append(type.name) }
        types[type.name] = type
    }

    /// The registered names, in registration order.
    public var names: [String] { order }

    package func type(named name: String) -> RegisteredType? { types[name] }

    package var allTypes: [RegisteredType] { order.compactMap { types[$0] } }
}

/// One registered reactor type, with what `GET /types` shows of it and how to host a new instance.
package struct RegisteredType: Sendable {
    package let name: String
    package let summary: String
    /// The name of its parameters' type; nil when it takes none.
    package let parameters: String?
    /// The JSON of each example action.
    let exampleActionsJSON: [[UInt8]]
    /// The JSON of its example parameters, when it takes parameters and was given an example.
    let exampleParametersJSON: [UInt8]?
    /// The JSON of the initial state of a fresh instance (made with the example parameters);
    /// nil for a type with parameters and no example of them.
    let initialStateJSON: [UInt8]?
    /// Makes the reactor of a new instance: checks its creation (throws
    /// ``HostingError/invalidParameters(_:)``) and returns what hosts it under an id.
    package let prepare:
        @Sendable (_ creation: InstanceCreation) throws(HostingError)
            -> @Sendable (_ id: String, _ context: InstanceContext) -> any HostedInstance
    /// Brings an instance back from its stored session (throws when that no longer decodes as
    /// this type, or its stored parameters no longer make a reactor).
    package let restore:
        @Sendable (_ id: String, _ context: InstanceContext, _ stored: StoredSession) throws(HostingError)
            -> any HostedInstance

    /// - Parameter sharesInitialState: whether every instance starts from the same state (its
    ///   reactor is made from nothing the creation says); by default when it takes no parameters.
    init<R: Reactor>(
        name: String, summary: String, exampleActions: [R.Action], parameters: String?,
        exampleParameters: [UInt8]?, sharesInitialState: Bool? = nil,
        make: @escaping @Sendable (InstanceCreation) throws(HostingError) -> R
    ) {
        self.name = name
        self.summary = summary
        self.parameters = parameters
        self.exampleActionsJSON = exampleActions.map { JSONCoding.encodeState($0) }
        self.exampleParametersJSON = exampleParameters
        let fixedInitialState: [UInt8]?
        if parameters == nil || exampleParameters != nil, let probe = try? make(InstanceCreation(parameters: exampleParameters)) {
            fixedInitialState = JSONCoding.encodeState(probe.initialState)
            probe.dispose()
        } else {
            fixedInitialState = nil
        }
        self.initialStateJSON = fixedInitialState
        // A type without parameters starts every instance from the same state; one with
        // parameters, from the state its reactor's parameters give.
        let sharesInitialState = sharesInitialState ?? (parameters == nil)
        self.prepare = { creation throws(HostingError) in
            let reactor = try make(creation)
            let owner = creation.context.subject
            return { id, context in HostedReactor(id: id, typeName: name, owner: owner, reactor: reactor, context: context) }
        }
        let upgradesReported = Locked<Set<[String]>>([])
        self.restore = { id, context, stored throws(HostingError) in
            var creation: InstanceCreation
            if let json = stored.creation {
                guard let decoded = InstanceCreation(json: json) else {
                    throw HostingError.storedSessionIncompatible("its stored creation parameters are not JSON")
                }
                creation = decoded
            } else {
                creation = InstanceCreation()
            }
            creation.context.isRestoration = true
            let reactor: R
            do throws(HostingError) {
                reactor = try make(creation)
            } catch .invalidParameters(let detail) {
                throw HostingError.storedSessionIncompatible("its stored parameters no longer make a reactor: \(detail)")
            }
            let initialStateJSON =
                sharesInitialState
                ? (fixedInitialState ?? JSONCoding.encodeState(reactor.initialState))
                : JSONCoding.encodeState(reactor.initialState)
            let restoration: Restoration<R>
            do throws(HostingError) {
                restoration = try Restoration<R>(
                    stored, initialStateJSON: initialStateJSON, countedHere: context.attempts.counted(id: id))
                // Once the session is known to decode (an activation that fails before this runs
                // nothing, and counts nothing), and before any of its pending actions runs again:
                // one that ends the process must not do so at every activation.
                if let committer = context.committer {
                    try RecoveryAttempts.count(for: stored, id: id, on: committer, ledger: context.attempts)
                }
            } catch {
                reactor.dispose()
                throw error
            }
            if !restoration.filledKeys.isEmpty, upgradesReported.withLock({ $0.insert(restoration.filledKeys).inserted }) {
                context.logger.notice(
                    "stored states of this type lack keys its State has now; each is filled from the initial state (reported once per set of keys)",
                    metadata: ["type": "\(name)", "filled": "\(restoration.filledKeys.joined(separator: ", "))"])
            }
            if let damaged = restoration.damagedHistory {
                context.logger.error(
                    "the stored history of a session is damaged: its versions up to the damaged one are not sent again (a client resuming from one of them gets the state)",
                    metadata: [
                        "instance": "\(InstanceID.logLabel(id))", "type": "\(name)", "damaged-version": "\(damaged.through)",
                        "versions-left-out": "\(damaged.count)",
                    ])
            }
            return HostedReactor(
                id: id, typeName: name, owner: creation.context.subject, reactor: reactor, context: context,
                restored: restoration)
        }
    }

    /// `{"exampleActions":[…],"exampleParameters":{…},"initialState":{…},"name":"…","parameters":"…","summary":"…"}`:
    /// the parameter keys only for a type that takes parameters, the initial state only when known.
    package var json: [UInt8] {
        var object = JSONObjectWriter()
        object.add("exampleActions", json: JSONText.array(exampleActionsJSON))
        if let exampleParametersJSON { object.add("exampleParameters", json: exampleParametersJSON) }
        if let initialStateJSON { object.add("initialState", json: initialStateJSON) }
        object.add("name", string: name)
        if let parameters { object.add("parameters", string: parameters) }
        object.add("summary", string: summary)
        return object.finish()
    }
}

/// The cluster channels a registry's reactors share, opened once per name.
private final class ClusterChannels: Sendable {
    private let open: @Sendable (String) -> any ClusterChannel
    private let opened = Locked<[String: any ClusterChannel]>([:])

    init(open: @escaping @Sendable (String) -> any ClusterChannel) {
        self.open = open
    }

    func channel(named name: String) -> any ClusterChannel {
        opened.withLock { opened in
            if let channel = opened[name] { return channel }
            let channel = open(name)
            opened[name] = channel
            return channel
        }
    }
}
