/// How a ``RemoteReactor`` waits before trying again: after its event stream dropped or ended
/// with a reason that means "reconnect", after failing to reach the server with a queued action,
/// and after a `429` or `503` refusal.
///
/// The wait before the first retry is the server's `retry:` hint (else ``initialDelay``); each
/// failure in a row doubles it (``multiplier``), up to ``maximumDelay``; a random share of it
/// (``jitter``) is taken off so that many clients do not come back in step.
public struct ReconnectPolicy: Sendable, Equatable {
    /// The first wait when the server sent no `retry:` hint.
    public var initialDelay: Duration
    /// The longest wait between two attempts (and the longest `Retry-After` honoured as such).
    public var maximumDelay: Duration
    /// How much each failure in a row lengthens the wait.
    public var multiplier: Double
    /// The share of a wait that may be taken off at random, 0 to 1.
    public var jitter: Double
    /// How many times in a row a request refused with `429`/`503` and `Retry-After` is sent
    /// again before the refusal is thrown.
    public var maximumRefusals: Int
    /// How long an event stream may stay silent before it counts as dropped. Keep it above the
    /// server's heartbeat interval (15 s by default).
    public var streamIdleTimeout: Duration

    /// A policy; the defaults suit an app on a phone.
    public init(
        initialDelay: Duration = .seconds(1), maximumDelay: Duration = .seconds(30), multiplier: Double = 2,
        jitter: Double = 0.2, maximumRefusals: Int = 5, streamIdleTimeout: Duration = .seconds(45)
    ) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.multiplier = multiplier
        self.jitter = jitter
        self.maximumRefusals = maximumRefusals
        self.streamIdleTimeout = streamIdleTimeout
    }

    /// The wait before attempt number `failures + 1`, given the server's `retry:` hint in
    /// milliseconds; `random` picks the jitter (between 0 and 1).
    public func delay(
        afterFailures failures: Int, retryHint: Int? = nil,
        random: Double = Double.random(in: 0...1)
    ) -> Duration {
        let base = retryHint.map { Duration.milliseconds(max(0, $0)) } ?? initialDelay
        var delay = base
        for _ in 0..<max(0, failures) where delay < maximumDelay {
            delay = delay * multiplier
        }
        delay = min(delay, maximumDelay)
        return delay * (1 - min(max(jitter, 0), 1) * min(max(random, 0), 1))
    }

    /// The wait before sending a refused request again, or nil when it is not to be sent again:
    /// only a `429` or `503` with `Retry-After`, at most ``maximumRefusals`` times in a row. A
    /// `503 unavailable` answered to `?wait=true` is not retried: that action was accepted before
    /// the server began to stop, and sending it again would apply it twice.
    func delay(afterRefusal problem: ReactorProblem, refusals: Int, wasWaiting: Bool) -> Duration? {
        guard problem.status == 429 || problem.status == 503, let seconds = problem.retryAfter,
            refusals < maximumRefusals, !(wasWaiting && problem.kind == "unavailable")
        else { return nil }
        return min(.seconds(seconds), maximumDelay)
    }
}
