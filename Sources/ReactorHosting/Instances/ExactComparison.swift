// Strings told apart by their bytes, where Swift's `==` would take two of them for one.

extension String {
    /// Whether `self` and `other` are the same UTF-8 bytes.
    ///
    /// `==` on `String` (and a `Set` or a `Dictionary` key) takes strings Unicode calls
    /// canonically equivalent for one: `"é"` and `"e"` followed by a combining accent, `"K"` and
    /// the Kelvin sign. A token's subject, issuer and audience are compared with no normalisation
    /// (RFC 7519 §2), so two such subjects are two callers: one must never reach the other's
    /// sessions, hold its admin rights or count against its quota.
    package func hasSameBytes(as other: String) -> Bool {
        utf8.elementsEqual(other.utf8)
    }
}
