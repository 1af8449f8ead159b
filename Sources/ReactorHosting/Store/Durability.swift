/// How soon a write reaches the session store.
public enum Durability: Sendable, Equatable {
    /// An action is acknowledged, and a state shown to anyone, only once committed.
    case sync
    /// Acknowledged and shown at once; committed within `flushInterval`, so a crash may lose
    /// what arrived in that window.
    case async(flushInterval: Duration)
}
