import Foundation
import Testing

@testable import ReactorClient

struct ReconnectPolicyTests {
    let policy = ReconnectPolicy(
        initialDelay: .seconds(1), maximumDelay: .seconds(10), multiplier: 2, jitter: 0.5,
        maximumRefusals: 2)

    @Test func theServersRetryHintComesFirstThenTheWaitDoubles() {
        #expect(policy.delay(afterFailures: 0, random: 0) == .seconds(1))
        #expect(policy.delay(afterFailures: 0, retryHint: 3000, random: 0) == .seconds(3))
        #expect(policy.delay(afterFailures: 1, retryHint: 3000, random: 0) == .seconds(6))
        #expect(policy.delay(afterFailures: 2, retryHint: 3000, random: 0) == .seconds(10))
        #expect(policy.delay(afterFailures: 60, retryHint: 3000, random: 0) == .seconds(10))
    }

    @Test func jitterTakesOffAtMostItsShare() {
        #expect(policy.delay(afterFailures: 0, retryHint: 2000, random: 1) == .seconds(1))
        #expect(policy.delay(afterFailures: 0, retryHint: 2000, random: 0.5) == .milliseconds(1500))
        for _ in 0..<100 {
            let delay = policy.delay(afterFailures: 0, retryHint: 2000)
            #expect(delay >= .seconds(1) && delay <= .seconds(2))
        }
    }

    @Test func refusalsWithRetryAfterAreRetriedABoundedNumberOfTimes() {
        let busy = ReactorProblem(
            type: ReactorProblem.typePrefix + "too-many-instances", title: "", detail: "",
            status: 429, retryAfter: 5)
        #expect(policy.delay(afterRefusal: busy, refusals: 0, wasWaiting: false) == .seconds(5))
        #expect(policy.delay(afterRefusal: busy, refusals: 2, wasWaiting: false) == nil)
        var long = busy
        long.retryAfter = 3600
        #expect(policy.delay(afterRefusal: long, refusals: 0, wasWaiting: false) == .seconds(10))
        var noHint = busy
        noHint.retryAfter = nil
        #expect(policy.delay(afterRefusal: noHint, refusals: 0, wasWaiting: false) == nil)
        let invalid = ReactorProblem(type: ReactorProblem.typePrefix + "invalid-action", title: "", detail: "", status: 400)
        #expect(policy.delay(afterRefusal: invalid, refusals: 0, wasWaiting: false) == nil)
    }

    @Test func anActionAcceptedBeforeTheServerStoppedIsNotSentTwice() {
        let stopping = ReactorProblem(
            type: ReactorProblem.typePrefix + "unavailable", title: "", detail: "",
            status: 503, retryAfter: 1)
        #expect(policy.delay(afterRefusal: stopping, refusals: 0, wasWaiting: true) == nil)
        #expect(policy.delay(afterRefusal: stopping, refusals: 0, wasWaiting: false) == .seconds(1))
    }

    @Test func problemJSONIsRead() throws {
        let body =
            #"{"detail":"no reactor instance has the id 'x'","status":404,"title":"Unknown reactor instance","type":"urn:reactor-server:problem:unknown-instance"}"#
        let problem = ReactorProblem(status: 404, body: Data(body.utf8), retryAfter: nil)
        #expect(
            problem
                == ReactorProblem(
                    type: "urn:reactor-server:problem:unknown-instance", title: "Unknown reactor instance",
                    detail: "no reactor instance has the id 'x'", status: 404))
        #expect(problem.kind == "unknown-instance")
        let plain = ReactorProblem(status: 502, body: Data("Bad Gateway".utf8), retryAfter: nil)
        #expect(plain.type == "about:blank")
        #expect(plain.detail == "Bad Gateway")
    }
}
