import Foundation
import ReactorServerKit
import Testing

/// An environment variable that does not read as its option's type is named with what it must hold.
@Suite struct ServiceEnvironmentTests {
    @Test func aFractionalOptionsVariableIsRefusedAsNotANumber() {
        // A name of this test's own (the environment is the process's), sorted before any other.
        let name = "A_SERVICE_ENVIRONMENT_TEST_FEE"
        setenv(name, "abc", 1)
        defer { unsetenv(name) }
        #expect(ServiceEnvironment.value(name, default: 2.5) == 2.5)
        #expect(
            ServiceEnvironment.firstProblem
                == "\(name)='abc' is not a number (the environment variable of --a-service-environment-test-fee)")
    }
}
