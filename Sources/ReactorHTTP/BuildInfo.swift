import CReactorBuildInfo

/// What this build of ReactorServer was made from: `make` and the Dockerfile pass
/// `git describe --tags --always --dirty` and `git rev-parse HEAD` in REACTOR_SERVER_VERSION and
/// REACTOR_SERVER_COMMIT, which Package.swift hands to the compiler; a build without them (a bare
/// `swift build`, a source archive, a package that depends on ReactorServer by URL) says
/// `unknown`. ``release`` is known in every build.
public enum BuildInfo {
    /// The version, e.g. `0.2.0`, `0.2.0-3-gabc1234-dirty`, or an abbreviated commit without tags.
    public static let version = String(cString: reactor_build_version())
    /// The full commit hash.
    public static let commit = String(cString: reactor_build_commit())
    /// The ReactorServer release this source is, or the last one before it in a checkout between
    /// releases: the newest version `CHANGELOG.md` names (`api/check` holds them equal). Unlike
    /// ``version``, it needs nothing from the build, so a team's service built against a release
    /// by URL knows which one it runs.
    public static let release = "0.4.0"
}
