import ReactorHTTP

/// The line `--version` prints by default (see ``ReactorServiceApp/version``).
package enum VersionLine {
    /// `command` with the build's version and commit when the build was given them, else with the
    /// ReactorServer release it was built against, which every build knows.
    package static func describe(
        command: String,
        version: String = BuildInfo.version,
        commit: String = BuildInfo.commit,
        release: String = BuildInfo.release
    ) -> String {
        guard version != "unknown" else { return "\(command) (ReactorServer \(release))" }
        return "\(command) \(version) (commit \(commit))"
    }
}
