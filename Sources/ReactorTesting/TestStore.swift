import Locking
import ReactorCore
import Testing

/// Drives a reactor in a test and asserts every state it publishes, in order, after TCA's
/// `TestStore`:
///
/// ```swift
/// let clock = TestClock()
/// let store = TestStore(CounterReactor(delay: .milliseconds(500), clock: clock), clock: clock)
/// await store.send(.increase) { $0.isLoading = true }
/// await store.advance(by: .milliseconds(500)) { $0.value = 1 }
/// await store.receive { $0.isLoading = false }
/// await store.receive { $0.alertMessage = "increased!" }
/// await store.finish()
/// ```
///
/// Each assertion says how the state changes from the previous one; the store compares the
/// state the reactor published with that and records an issue, with a line diff, when they
/// differ. Pulse fields compare with their counts, so a value assigned again must be asserted
/// again. ``finish(sourceLocation:)`` records an issue for states not asserted, mutations still running and
/// errors not asserted. With ``Exhaustivity/off`` only what the closures set is checked, and
/// states in between may be skipped.
public final class TestStore<R: Reactor>: Sendable where R.State: Equatable {
    /// How much a test must assert.
    public enum Exhaustivity: Sendable {
        /// Every state and every error, in order.
        case on
        /// Only what the assertions name: states in between are skipped, and `finish` checks
        /// nothing left over.
        case off
    }

    private struct Record {
        /// States published and not yet asserted, oldest first.
        var states: [R.State] = []
        var errors: [MutationFailure] = []
        var waiters: [UInt64: (isReady: @Sendable (Record) -> Bool, resume: @Sendable () -> Void)] = [:]
        var nextWaiter: UInt64 = 0
    }

    /// The reactor under test.
    public let reactor: R
    private let clock: TestClock?
    private let exhaustivity: Exhaustivity
    private let timeout: Duration
    private let record = Locked(Record())
    /// The last state asserted (or the initial one).
    private let asserted: Locked<R.State>
    private let tokens: Locked<[ObservationToken]>
    /// The receipts of the actions sent, for `finish` to wait on.
    private let receipts = Locked<[ActionReceipt]>([])
    /// Whether `finish` ran; a store let go without it checks what it can at once.
    private let finished = Locked(false)
    private let createdAt: SourceLocation

    /// A store over `reactor`, whose delays run on `clock`.
    /// - Parameters:
    ///   - reactor: the reactor under test.
    ///   - clock: the clock its delays run on, advanced by ``advance(by:sourceLocation:assert:)``;
    ///     nil when it has none.
    ///   - exhaustivity: whether every state and error must be asserted (``Exhaustivity/on``).
    ///   - timeout: the longest a `receive` waits for a state before it records an issue (a
    ///     guard so a broken test fails rather than hangs, not a way to wait for work).
    ///   - sourceLocation: where the store is made, named by the issues it records about itself.
    public init(
        _ reactor: R, clock: TestClock? = nil, exhaustivity: Exhaustivity = .on, timeout: Duration = .seconds(5),
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        self.createdAt = sourceLocation
        self.reactor = reactor
        self.clock = clock
        self.exhaustivity = exhaustivity
        self.timeout = timeout
        self.asserted = Locked(reactor.currentState)
        let record = self.record
        let started = Locked(false)
        let stateToken = reactor.observe { update in
            // The first call is the state the store starts from.
            let isFirst = started.withLock { started -> Bool in
                defer { started = true }
                return !started
            }
            if isFirst { return }
            TestStore.change(record) { $0.states.append(update.state) }
        }
        let errorToken = reactor.observeErrors { failure in
            TestStore.change(record) { $0.errors.append(failure) }
        }
        tokens = Locked([stateToken, errorToken])
    }

    /// A store over `reactor` brought back as the server brings back a stored session after a
    /// crash: it starts from `state`, and the actions the crash cut off go to its
    /// `recover(interrupted:)`, whose states the test then asserts with ``receive(sourceLocation:assert:)``:
    ///
    /// ```swift
    /// let store = TestStore(CounterReactor(delay: .zero), restoring: .init(value: 0, isLoading: true),
    ///                       interrupted: [InterruptedAction(action: .increase, sequence: 1, reducedMutations: 1)])
    /// await store.receive { $0.value = 1 }
    /// await store.receive { $0.isLoading = false }
    /// await store.finish()
    /// ```
    ///
    /// Actions sent afterwards are numbered after the interrupted ones.
    public convenience init(
        _ reactor: R, restoring state: R.State, interrupted: [InterruptedAction<R.Action>] = [],
        clock: TestClock? = nil, exhaustivity: Exhaustivity = .on, timeout: Duration = .seconds(5),
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let restored = reactor.runtime.restore(
            reactor, state: state, version: 0,
            sequence: interrupted.map(\.sequence).max() ?? 0)
        if !restored {
            Issue.record(
                "the reactor had started already, so it cannot be restored; give the store a new one",
                sourceLocation: sourceLocation)
        }
        self.init(reactor, clock: clock, exhaustivity: exhaustivity, timeout: timeout, sourceLocation: sourceLocation)
        if restored, !interrupted.isEmpty {
            reactor.runtime.apply(reactor.recover(interrupted: interrupted), reactor: reactor)
        }
    }

    /// A store let go without ``finish(sourceLocation:)`` (exhaustive) records an issue for what is left over
    /// now: states or errors not asserted, mutations still running.
    deinit {
        guard exhaustivity == .on, !finished.withLock({ $0 }) else { return }
        let (states, errors) = record.withLock { ($0.states.count, $0.errors.count) }
        if states > 0 || errors > 0 || reactor.runtime.hasActionsInFlight {
            let running = reactor.runtime.hasActionsInFlight ? " and mutations still running" : ""
            Issue.record(
                "the test ended with \(states) state(s) and \(errors) error(s) not asserted\(running); end it with `await store.finish()`",
                sourceLocation: createdAt)
        }
    }

    /// The state the assertions have reached.
    public var state: R.State { asserted.withLock { $0 } }

    /// Sends `action` and asserts the first state it produces (`update` applied to the state
    /// asserted last). Without `update`, asserts that it produced no state at once.
    public func send(
        _ action: R.Action, sourceLocation: SourceLocation = #_sourceLocation,
        assert update: ((inout R.State) -> Void)? = nil
    ) async {
        let pendingBefore = exhaustivity == .on ? record.withLock { $0.states.count } : 0
        if pendingBefore > 0 {
            Issue.record("\(pendingBefore) state(s) published before this action were not asserted", sourceLocation: sourceLocation)
        }
        let receipt = reactor.send(action)
        receipts.withLock { $0.append(receipt) }
        guard let update else {
            if exhaustivity == .on, record.withLock({ !$0.states.isEmpty }) {
                Issue.record("the action produced a state at once; assert it with a closure", sourceLocation: sourceLocation)
            }
            return
        }
        await expectNext(update, sourceLocation: sourceLocation)
    }

    /// Asserts the next state the reactor publishes: `update` applied to the state asserted last.
    public func receive(
        sourceLocation: SourceLocation = #_sourceLocation,
        assert update: @escaping (inout R.State) -> Void
    ) async {
        await expectNext(update, sourceLocation: sourceLocation)
    }

    /// Moves the clock on by `duration` (once the work in flight is waiting on it) and, with
    /// `update`, asserts the next state.
    public func advance(
        by duration: Duration, sourceLocation: SourceLocation = #_sourceLocation,
        assert update: ((inout R.State) -> Void)? = nil
    ) async {
        guard let clock else {
            Issue.record("advance(by:) needs the TestStore to be made with the reactor's TestClock", sourceLocation: sourceLocation)
            return
        }
        if reactor.runtime.hasActionsInFlight { await clock.waitForSleepers(1) }
        clock.advance(by: duration)
        if let update { await expectNext(update, sourceLocation: sourceLocation) }
    }

    /// Asserts the next mutation error: its action's sequence (if given) and that its message
    /// contains `message` (if given).
    public func receiveError(
        action sequence: UInt64? = nil, containing message: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        guard await wait(until: { !$0.errors.isEmpty }) else {
            Issue.record("no mutation error within \(timeout)", sourceLocation: sourceLocation)
            return
        }
        let failure = record.withLock { $0.errors.removeFirst() }
        if let sequence, failure.actionSequence != sequence {
            Issue.record(
                "the error came from action \(failure.actionSequence.map(String.init) ?? "none"), not \(sequence)",
                sourceLocation: sourceLocation)
        }
        if let message, !failure.message.contains(message) {
            Issue.record("the error \"\(failure.message)\" does not contain \"\(message)\"", sourceLocation: sourceLocation)
        }
    }

    /// Waits until the reactor's actions have settled, then (exhaustively) records an issue for
    /// every state or error not asserted, and for mutations still waiting on the clock.
    public func finish(sourceLocation: SourceLocation = #_sourceLocation) async {
        finished.withLock { $0 = true }
        let sent = receipts.withLock { $0 }
        // Whichever comes first; a settling that never comes leaves only its task behind.
        let settled: Bool = await withCheckedContinuation { continuation in
            let answered = Locked(false)
            let answer: @Sendable (Bool) -> Void = { value in
                let first = answered.withLock { answered -> Bool in
                    defer { answered = true }
                    return !answered
                }
                if first { continuation.resume(returning: value) }
            }
            Task { [reactor] in
                for receipt in sent { await reactor.settled(receipt) }
                answer(true)
            }
            Task { [timeout] in
                try? await Task.sleep(for: timeout)
                answer(false)
            }
        }
        guard settled, !reactor.runtime.hasActionsInFlight else {
            let sleeping = clock.map { " (\($0.sleeperCount) waiting on the clock)" } ?? ""
            Issue.record("mutations are still running at the end of the test\(sleeping)", sourceLocation: sourceLocation)
            return
        }
        tokens.withLock { tokens in
            for token in tokens { token.cancel() }
            tokens.removeAll()
        }
        guard exhaustivity == .on else { return }
        let (states, errors) = record.withLock { ($0.states, $0.errors) }
        if !states.isEmpty {
            Issue.record(
                "\(states.count) state(s) were not asserted; the first:\n\(Self.describe(states[0]))",
                sourceLocation: sourceLocation)
        }
        for error in errors {
            Issue.record("a mutation error was not asserted: \(error.errorType): \(error.message)", sourceLocation: sourceLocation)
        }
    }

    // MARK: - Matching

    private func expectNext(_ update: (inout R.State) -> Void, sourceLocation: SourceLocation) async {
        switch exhaustivity {
        case .on:
            guard await wait(until: { !$0.states.isEmpty }) else {
                Issue.record("no state within \(timeout)", sourceLocation: sourceLocation)
                return
            }
            let actual = record.withLock { $0.states.removeFirst() }
            var expected = asserted.withLock { $0 }
            update(&expected)
            if actual != expected {
                let difference = Self.diff(expected, actual)
                Issue.record(
                    "the state differs from the expected one (− expected, + actual):\n\(difference)",
                    sourceLocation: sourceLocation)
            }
            asserted.withLock { $0 = actual }
        case .off:
            // The first state, from now on, that `update` applied to the state before it gives;
            // the states passed over on the way count as seen.
            var found = false
            let deadline = ContinuousClock.now + timeout
            while !found {
                let states = record.withLock { record -> [R.State] in
                    defer { record.states.removeAll() }
                    return record.states
                }
                for (index, state) in states.enumerated() {
                    var expected = asserted.withLock { $0 }
                    update(&expected)
                    asserted.withLock { $0 = state }
                    if expected == state {
                        found = true
                        // What came after the match is still to be seen.
                        let later = Array(states[(index + 1)...])
                        if !later.isEmpty { record.withLock { $0.states.insert(contentsOf: later, at: 0) } }
                        break
                    }
                }
                if found || ContinuousClock.now >= deadline { break }
                _ = await wait(until: { !$0.states.isEmpty })
            }
            if !found { Issue.record("no state matched within \(timeout)", sourceLocation: sourceLocation) }
        }
    }

    /// Waits until `isReady` holds for the record, or the timeout passed; returns whether it holds.
    private func wait(until isReady: @escaping @Sendable (Record) -> Bool) async -> Bool {
        let id = record.withLock { record -> UInt64 in
            record.nextWaiter += 1
            return record.nextWaiter
        }
        let guardTimer = Task { [record, timeout] in
            try? await Task.sleep(for: timeout)
            let waiter = record.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
        defer { guardTimer.cancel() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = record.withLock { record -> Bool in
                if isReady(record) { return true }
                record.waiters[id] = (isReady, { continuation.resume() })
                return false
            }
            if ready { continuation.resume() }
        }
        return record.withLock { isReady($0) }
    }

    /// Changes the record and resumes the waiters whose condition now holds.
    private static func change(_ record: Locked<Record>, _ body: (inout Record) -> Void) {
        let ready = record.withLock { record -> [@Sendable () -> Void] in
            body(&record)
            let due = record.waiters.filter { $0.value.isReady(record) }
            for id in due.keys { record.waiters[id] = nil }
            return due.values.map(\.resume)
        }
        for resume in ready { resume() }
    }

    // MARK: - Diffs

    static func describe(_ state: R.State) -> String {
        var text = ""
        dump(state, to: &text)
        return text
    }

    /// The lines of the two states' dumps, each line the same in both shown once and each that
    /// differs shown as `−` expected and `+` actual.
    static func diff(_ expected: R.State, _ actual: R.State) -> String {
        let left = describe(expected).split(separator: "\n", omittingEmptySubsequences: false)
        let right = describe(actual).split(separator: "\n", omittingEmptySubsequences: false)
        var lines: [String] = []
        for index in 0..<max(left.count, right.count) {
            let old = index < left.count ? String(left[index]) : nil
            let new = index < right.count ? String(right[index]) : nil
            if old == new {
                lines.append("  " + (old ?? ""))
            } else {
                if let old { lines.append("− " + old) }
                if let new { lines.append("+ " + new) }
            }
        }
        return lines.joined(separator: "\n")
    }
}
