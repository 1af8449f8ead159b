import Foundation
import Locking

/// Reads option defaults from the environment, so that every option of a service's command line
/// has an environment variable of the same meaning (a flag given on the command line wins).
///
/// An app's own options read their defaults the same way:
/// ```swift
/// struct Options: ParsableArguments {
///     @Option(parsing: .unconditional, help: "Latency of the search API, in milliseconds (SEARCH_LATENCY_MS).")
///     var searchLatencyMs: Int = ServiceEnvironment.value("SEARCH_LATENCY_MS", default: 300)
/// }
/// ```
/// (`parsing: .unconditional` lets a number option take a negative value, `--search-latency-ms -5`,
/// so that `validate()` can refuse it with its own message; without it ArgumentParser reads `-5`
/// as another flag and says the value is missing.)
/// A variable that is set (and not empty) must hold a value its option accepts: one that does not
/// is kept as a problem, which `serve` reports (naming the variable and its option) instead of
/// silently falling back to the default.
public enum ServiceEnvironment {
    private static let problems = Locked<[String: String]>([:])

    /// The variable `name`, or `fallback` when it is unset or empty.
    public static func string(_ name: String, default fallback: String) -> String {
        ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 } ?? fallback
    }

    /// What a variable read as `type` must hold, for the message that refuses it.
    private static func kind(of type: Any.Type) -> String {
        switch type {
        case is UInt16.Type: return "a port number from 0 to 65535"
        case is any BinaryFloatingPoint.Type: return "a number"
        case is any FixedWidthInteger.Type: return "a whole number"
        default: return "a value of type \(type)"
        }
    }

    /// The variable `name` read as a `Value` (a number, a port), or `fallback` when it is unset
    /// or empty. A value that does not read as a `Value` is reported by ``firstProblem``.
    public static func value<Value: LosslessStringConvertible>(_ name: String, default fallback: Value) -> Value {
        guard let text = ProcessInfo.processInfo.environment[name], !text.isEmpty else { return fallback }
        guard let value = Value(text.trimmingCharacters(in: .whitespaces)) else {
            refuse(name, text, kind: kind(of: Value.self))
            return fallback
        }
        return value
    }

    /// The variable `name` read as a switch, or `fallback` when it is unset or empty: `1`, `true`,
    /// `yes` and `on` are true, `0`, `false`, `no` and `off` false, in any case. Anything else is
    /// reported by ``firstProblem``.
    public static func value(_ name: String, default fallback: Bool) -> Bool {
        guard let text = ProcessInfo.processInfo.environment[name], !text.isEmpty else { return fallback }
        switch text.trimmingCharacters(in: .whitespaces).lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default:
            refuse(name, text, kind: "a switch (1 or 0, true or false, yes or no, on or off)")
            return fallback
        }
    }

    /// Keeps the problem with variable `name`, whose `text` is not `kind`.
    private static func refuse(_ name: String, _ text: String, kind: String) {
        problems.withLock {
            $0[name] = "\(name)='\(text.prefix(64))' is not \(kind) (the environment variable of --\(flag(name)))"
        }
    }

    /// The first invalid environment value met so far, by name; `serve` refuses to start with it.
    public static var firstProblem: String? {
        problems.withLock { problems in problems.keys.sorted().first.flatMap { problems[$0] } }
    }

    /// `--max-body-bytes (MAX_BODY_BYTES)` for `max-body-bytes`: how messages name a setting.
    public static func setting(_ flag: String) -> String {
        "--\(flag) (\(flag.uppercased().replacingOccurrences(of: "-", with: "_")))"
    }

    /// `max-body-bytes` for `MAX_BODY_BYTES`.
    private static func flag(_ variable: String) -> String {
        variable.lowercased().replacingOccurrences(of: "_", with: "-")
    }
}
