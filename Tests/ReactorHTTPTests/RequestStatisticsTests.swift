import Foundation
import Testing

@testable import ReactorHTTP

@Suite struct RequestStatisticsTests {
    @Test func durationsFallInTheFirstBucketWhoseBoundTheyDoNotExceed() {
        let statistics = RequestStatistics()
        let route = statistics.route("/r", method: "GET")
        for nanoseconds: Int64 in [1, 50_000, 50_001, 10_000_000_000, 10_000_000_001] {
            route.requestFinished(status: 200, nanoseconds: nanoseconds)
        }
        let text = statistics.render()
        #expect(text.contains(#"http_request_duration_seconds_bucket{route="/r",le="0.00005"} 2"#))
        #expect(text.contains(#"http_request_duration_seconds_bucket{route="/r",le="0.0001"} 3"#))
        #expect(text.contains(#"http_request_duration_seconds_bucket{route="/r",le="5.0"} 3"#))
        #expect(text.contains(#"http_request_duration_seconds_bucket{route="/r",le="10.0"} 4"#))
        #expect(text.contains(#"http_request_duration_seconds_bucket{route="/r",le="+Inf"} 5"#))
        #expect(text.contains(#"http_request_duration_seconds_sum{route="/r"} 20.000100003"#))
        #expect(text.contains(#"http_requests_total{route="/r",method="GET",status="200"} 5"#))
    }

    @Test func countsFromManyThreadsAddUpAndRareStatusesAreKeptToo() async {
        let statistics = RequestStatistics()
        let get = statistics.route("/r", method: "GET")
        let delete = statistics.route("/r", method: "DELETE")
        let threads = 8
        let each = 1_000
        runOnThreads(threads) { thread in
            for _ in 0..<each {
                get.requestFinished(status: thread == 0 ? 418 : 200, nanoseconds: 1_000)
                delete.requestFinished(status: 204, nanoseconds: 1_000)
                statistics.actionAccepted()
            }
        }
        let text = statistics.render()
        #expect(text.contains(#"http_requests_total{route="/r",method="GET",status="200"} \#((threads - 1) * each)"#))
        #expect(text.contains(#"http_requests_total{route="/r",method="GET",status="418"} \#(each)"#))
        #expect(text.contains(#"http_requests_total{route="/r",method="DELETE",status="204"} \#(threads * each)"#))
        // One histogram per route, over its methods.
        #expect(text.contains(#"http_request_duration_seconds_count{route="/r"} \#(2 * threads * each)"#))
        #expect(text.contains("reactor_actions_accepted_total \(threads * each)"))
    }

    @Test func threadsPastThePrivateLimitShareOneShardAndNothingIsLost() {
        let statistics = RequestStatistics(privateShardLimit: 2)
        let route = statistics.route("/r", method: "GET")
        let threads = 12
        let each = 2_000
        runOnThreads(threads) { _ in
            for _ in 0..<each { route.requestFinished(status: 200, nanoseconds: 1_000) }
        }
        #expect(statistics.shardCount == 3)
        #expect(statistics.render().contains(#"http_requests_total{route="/r",method="GET",status="200"} \#(threads * each)"#))
    }

    @Test func secondsAreWrittenExactly() {
        #expect(RequestStatistics.seconds(nanoseconds: 0) == "0.0")
        #expect(RequestStatistics.seconds(nanoseconds: 9_294) == "0.000009294")
        #expect(RequestStatistics.seconds(nanoseconds: 1_500_000_000) == "1.5")
        #expect(RequestStatistics.seconds(nanoseconds: 12_000_000_001) == "12.000000001")
    }
}

/// Runs `body` on `count` threads of their own, all let go at once (so several write shared
/// counters together), and returns when every one has finished. `body` gets the thread's index.
private func runOnThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let start = DispatchSemaphore(value: 0)
    let done = DispatchGroup()
    for index in 0..<count {
        done.enter()
        Thread.detachNewThread {
            start.wait()
            body(index)
            done.leave()
        }
    }
    for _ in 0..<count { start.signal() }
    done.wait()
}
