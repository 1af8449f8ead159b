import Locking

/// A weak reference that can be set after it is handed out, so that a part made in an
/// initialiser can call back its owner without keeping it alive.
final class WeakReference<Object: AnyObject & Sendable>: Sendable {
    private let reference = Locked<Weak>(Weak())

    private struct Weak {
        weak var object: Object?
    }

    init() {}

    var object: Object? {
        get { reference.withLock { $0.object } }
        set { reference.withLock { $0.object = newValue } }
    }
}
