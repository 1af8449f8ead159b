import ReactorHTTP
import ReactorServerKit
import Testing

/// What `--version` prints by default: the build's version and commit when `make` or the
/// Dockerfile gave them, else the release, which a team's service built by URL still knows.
@Suite struct VersionLineTests {
    @Test func aBuildGivenItsVersionNamesItAndItsCommit() {
        let line = VersionLine.describe(command: "reactor-server", version: "0.2.0-3-gabc1234", commit: "abc1234def", release: "0.2.0")
        #expect(line == "reactor-server 0.2.0-3-gabc1234 (commit abc1234def)")
    }

    @Test func aBuildWithoutAVersionNamesTheReleaseItWasBuiltAgainst() {
        let line = VersionLine.describe(command: "my-service", version: "unknown", commit: "unknown", release: "0.2.0")
        #expect(line == "my-service (ReactorServer 0.2.0)")
    }

    @Test func theReleaseIsAVersionNumber() {
        let parts = BuildInfo.release.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) }, "\(BuildInfo.release)")
    }
}
