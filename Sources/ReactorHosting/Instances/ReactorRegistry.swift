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

    /// Creates an empty registry.
    public init() {}

    /// Registers a reactor type under `name`.
    /// - Parameters:
    ///   - name: the name clients use in `POST /reactors {"type": name}`.
    ///   - summary: one line describing the type, shown by `GET /types`.
    ///   - exampleActions: actions shown by `GET /types` as examples of the action JSON.
    ///   - make: creates a fresh reactor for each new instance.
    public mutating func register<R: Reactor>(
        _ name: String,
        summary: String = "",
        exampleActions: [R.Action] = [],
        make: @escaping @Sendable () -> R
    ) {
        precondition(!name.isEmpty, "a reactor type needs a name")
        if types[name] == nil { order.append(name) }
        types[name] = RegisteredType(name: name, summary: summary, exampleActions: exampleActions, make: make)
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
    /// The JSON of each example action.
    let exampleActionsJSON: [[UInt8]]
    /// The JSON of the initial state of a fresh instance.
    let initialStateJSON: [UInt8]
    /// Hosts an instance with the given id: a new one, or one brought back from its stored
    /// session (throws when that no longer decodes as this type).
    package let host: @Sendable (_ id: String, _ context: InstanceContext, _ restored: StoredSession?) throws(HostingError)
        -> any HostedInstance

    init<R: Reactor>(name: String, summary: String, exampleActions: [R.Action], make: @escaping @Sendable () -> R) {
        self.name = name
        self.summary = summary
        self.exampleActionsJSON = exampleActions.map { JSONCoding.encodeState($0) }
        let probe = make()
        self.initialStateJSON = JSONCoding.encodeState(probe.initialState)
        probe.dispose()
        let initialStateJSON = self.initialStateJSON
        let upgradesReported = Locked<Set<[String]>>([])
        self.host = { id, context, stored throws(HostingError) in
            let restoration = try stored.map { stored throws(HostingError) in
                try Restoration<R>(stored, initialStateJSON: initialStateJSON)
            }
            if let filled = restoration?.filledKeys, !filled.isEmpty,
               upgradesReported.withLock({ $0.insert(filled).inserted }) {
                context.logger.notice("stored states of this type lack keys its State has now; each is filled from the initial state (reported once per set of keys)",
                                      metadata: ["type": "\(name)", "filled": "\(filled.joined(separator: ", "))"])
            }
            return HostedReactor(id: id, typeName: name, reactor: make(), context: context, restored: restoration)
        }
    }

    /// `{"exampleActions":[…],"initialState":{…},"name":"…","summary":"…"}`
    package var json: [UInt8] {
        var object = JSONObjectWriter()
        object.add("exampleActions", json: JSONText.array(exampleActionsJSON))
        object.add("initialState", json: initialStateJSON)
        object.add("name", string: name)
        object.add("summary", string: summary)
        return object.finish()
    }
}
