import Foundation

/// A new directory under the temporary directory, removed with everything in it once nothing
/// holds it: a suite keeps one per test (Swift Testing makes a suite instance per test and drops
/// it when the test ends), a helper for as long as the server it started.
public final class ScratchDirectory: Sendable {
    /// Where it is.
    public let url: URL

    /// Makes `<temporary directory>/<prefix>-<UUID>`.
    public init(_ prefix: String) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The path of `name` inside it.
    public func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}
