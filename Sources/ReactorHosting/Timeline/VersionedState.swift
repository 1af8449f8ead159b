import Locking
import SortedJSON

/// One published state of an instance with its version, encoded to JSON lazily — at most once,
/// by whichever subscriber or request needs it first — and then shared by all of them.
package protocol VersionedState: AnyObject, Sendable {
    /// The state's version on its instance's stream: 0 for the initial state, then +1 per state.
    var version: UInt64 { get }
    /// The state as sorted-key JSON.
    var json: [UInt8] { get }
    /// The state framed for the wire by `frame` (a server-sent event, say), built by the first
    /// reader and shared by every later one. A process frames states one way only, so every
    /// reader passes the same `frame`.
    func framed(by frame: (_ version: UInt64, _ json: [UInt8]) -> [UInt8]) -> [UInt8]
    /// The RFC 6902 patch from `previous` (the version just before this one) to this state,
    /// framed by `frame`: computed by the first reader that needs it and shared by every later
    /// one. Nil when the patch would be larger than the state (send the state instead).
    func framedPatch(
        from previous: any VersionedState,
        by frame: (_ version: UInt64, _ patch: [UInt8]) -> [UInt8]
    ) -> [UInt8]?
}

extension VersionedState {
    /// The patch from `previous` framed by `frame`, or nil when larger than the state; for
    /// ``VersionedState/framedPatch(from:by:)``, cached in `cache`.
    fileprivate func framedPatch(
        from previous: any VersionedState, json: [UInt8], cache: borrowing SetOnceReference<FramedPatch>,
        by frame: (_ version: UInt64, _ patch: [UInt8]) -> [UInt8]
    ) -> [UInt8]? {
        if let cached = cache.load() { return cached.bytes }
        // Computed by one reader while the others wait: a diff costs far more than the wait.
        return patchComputation[Int(bitPattern: UInt(bitPattern: ObjectIdentifier(self).hashValue) % 64)].withLock { _ in
            if let cached = cache.load() { return cached.bytes }
            let patch = JSONPatch.diff(from: previous.json, to: json)
            let framed = patch.flatMap { $0.count > json.count ? nil : frame(version, $0) }
            return cache.storeIfNil(FramedPatch(framed)).bytes
        }
    }
}

/// A `VersionedState` over a concrete state type.
final class EncodedOnDemand<State: Encodable & Sendable>: VersionedState {
    package let version: UInt64
    private let state: State
    /// Set once, by the first reader that needs the JSON (a `GET`, a stream, a replay); until
    /// then the object is its only allocation.
    private let encoded = SetOnceReference<EncodedState>()

    init(version: UInt64, state: State) {
        self.version = version
        self.state = state
    }

    /// A state whose JSON is already encoded (to be stored before it was published).
    init(version: UInt64, state: State, json: [UInt8]) {
        self.version = version
        self.state = state
        _ = encoded.storeIfNil(EncodedState(json: json))
    }

    package var json: [UInt8] { bytes.json }

    package func framed(by frame: (_ version: UInt64, _ json: [UInt8]) -> [UInt8]) -> [UInt8] {
        let bytes = self.bytes
        if let framed = bytes.framed.load() { return framed.bytes }
        return bytes.framed.storeIfNil(FramedBytes(frame(version, bytes.json))).bytes
    }

    package func framedPatch(
        from previous: any VersionedState,
        by frame: (_ version: UInt64, _ patch: [UInt8]) -> [UInt8]
    ) -> [UInt8]? {
        let bytes = self.bytes
        return framedPatch(from: previous, json: bytes.json, cache: bytes.patch, by: frame)
    }

    private var bytes: EncodedState {
        if let bytes = encoded.load() { return bytes }
        // Two racing first readers may both encode; the first to store wins, so every reader
        // sees the same bytes.
        return encoded.storeIfNil(EncodedState(json: JSONCoding.encodeState(state)))
    }
}

/// A state's JSON and, once a reader framed it, its wire form. Not nested in the generic
/// `EncodedOnDemand`, so releasing a state needs no generic metadata lookup.
final class EncodedState: Sendable {
    let json: [UInt8]
    /// Set once, by the first reader that frames the state.
    let framed = SetOnceReference<FramedBytes>()
    /// Set once, by the first patch-format reader: the patch from the version before.
    let patch = SetOnceReference<FramedPatch>()

    init(json: [UInt8]) {
        self.json = json
    }
}

/// A state's bytes as framed for the wire.
final class FramedBytes: Sendable {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }
}

/// Serialises the computation of each patch, so it is computed once even when the streams of
/// several event loops ask for it at the same moment; striped by state, so instances do not wait
/// on each other.
private let patchComputation = (0..<64).map { _ in Locked(()) }

/// A state's patch from the version before, as framed for the wire; nil when the patch would be
/// larger than the state.
final class FramedPatch: Sendable {
    let bytes: [UInt8]?

    init(_ bytes: [UInt8]?) {
        self.bytes = bytes
    }
}

/// A state known only by its JSON: a version of the history loaded from the session store.
final class StoredVersion: VersionedState {
    package let version: UInt64
    package let json: [UInt8]
    private let framed = SetOnceReference<FramedBytes>()
    private let patch = SetOnceReference<FramedPatch>()

    init(version: UInt64, json: [UInt8]) {
        self.version = version
        self.json = json
    }

    package func framed(by frame: (_ version: UInt64, _ json: [UInt8]) -> [UInt8]) -> [UInt8] {
        if let framed = framed.load() { return framed.bytes }
        return framed.storeIfNil(FramedBytes(frame(version, json))).bytes
    }

    package func framedPatch(
        from previous: any VersionedState,
        by frame: (_ version: UInt64, _ patch: [UInt8]) -> [UInt8]
    ) -> [UInt8]? {
        framedPatch(from: previous, json: json, cache: patch, by: frame)
    }
}
