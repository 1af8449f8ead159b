/// A query's parameters as they are read: the last value of each name, and the names that came
/// more than once.
struct QueryParameters {
    private(set) var values: [String: String] = [:]
    private(set) var repeatedNames: Set<String> = []

    /// Adds the parameter `name=value`, which replaces an earlier value of `name`.
    mutating func add(_ name: String, _ value: String) {
        if values.updateValue(value, forKey: name) != nil { repeatedNames.insert(name) }
    }
}
