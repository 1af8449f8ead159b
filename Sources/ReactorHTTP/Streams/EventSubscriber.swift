import Locking
import MicroHTTP
import ReactorHosting

/// How a stream sends each version.
enum EventFormat: Sendable, Equatable {
    /// `event: state` with the whole state.
    case states
    /// `event: patch` with an RFC 6902 patch from the previous event's state, when that is
    /// smaller; `event: state` first, on resume, after a gap and when the patch is not smaller.
    case patches
}

/// One client's event stream on one instance. It pulls from the instance's timeline whenever the
/// connection can take bytes: a client that keeps up (at most `catchUpLimit` versions behind at a
/// write opportunity) is sent every version; one further behind is sent the latest state only
/// (conflated). Either way it never holds the instance or other subscribers back. A state that
/// skips versions after the last one this client has is preceded by a `: snapshot` comment line.
/// A client resuming after a version the instance does not have is sent `event: rewound` first.
final class EventSubscriber: HTTPStreamSource, TimelineSubscriber {
    /// What the instance's side hands over: the connection to wake and the error events to
    /// send. Under a lock of its own, held only for a moment, so that waking the stream never
    /// waits while the connection's thread builds a chunk (encodes a state, computes a patch)
    /// under ``progress``: that would hold back the thread applying the instance's actions.
    private struct Mailbox {
        var stream: HTTPStream?
        /// Framed events waiting to go out (mutation errors), bounded.
        var pendingEvents: [[UInt8]] = []
        var closed = false
    }

    /// What the stream has sent; read and changed by the connection's thread as it builds each
    /// chunk (see ``Mailbox`` for what other threads touch).
    private struct Progress {
        /// The newest version already sent, nil before the first state.
        var lastSentVersion: UInt64?
        /// The state this stream last sent as an event (a patch's base); nil before it sent one.
        var lastSentState: (any VersionedState)?
        /// States to send first, oldest first (a `Last-Event-ID` replay).
        var replay: [any VersionedState]
        var sentPrelude = false
        var sentEnd = false
    }

    /// Most queued error events kept per subscriber; older ones are dropped first.
    static let pendingEventLimit = 32
    /// Most replayed states written in one chunk.
    static let replayBatch = 64
    /// A subscriber at most this many versions behind is sent each of them; further behind, it
    /// skips to the latest state.
    static let catchUpLimit: UInt64 = 32

    private let timeline: StateTimeline
    private let format: EventFormat
    private let retryMilliseconds: Int
    private let progress: Locked<Progress>
    private let mailbox: Locked<Mailbox>
    private let onClose: @Sendable () -> Void
    private let onWrite: (@Sendable (_ version: UInt64) -> Void)?
    /// When the credentials the stream was opened with expire: it ends then (within a
    /// heartbeat interval, when the connection next asks for bytes). Nil: never.
    private let credentialsExpire: ContinuousClock.Instant?

    /// - Parameters:
    ///   - resumingAfter: the client's `Last-Event-ID`, if any.
    ///   - onClose: called once when the stream closes, for any reason.
    ///   - onWrite: told the newest version each chunk handed to the connection holds (tracing).
    ///   - format: whole states, or patches from the state sent before.
    ///   - credentialsExpire: when the credentials it was opened with expire; nil: never.
    init(
        timeline: StateTimeline, resumingAfter lastEventID: UInt64?, format: EventFormat = .states,
        retryMilliseconds: Int, credentialsExpire: ContinuousClock.Instant? = nil,
        onWrite: (@Sendable (_ version: UInt64) -> Void)? = nil, onClose: @escaping @Sendable () -> Void
    ) {
        self.credentialsExpire = credentialsExpire
        self.timeline = timeline
        self.format = format
        self.retryMilliseconds = retryMilliseconds
        self.onClose = onClose
        self.onWrite = onWrite
        var progress = Progress(replay: [])
        var mailbox = Mailbox()
        if let lastEventID {
            if let missed = timeline.states(after: lastEventID) {
                progress.lastSentVersion = lastEventID
                progress.replay = missed
            } else if lastEventID <= timeline.latest.version {
                // The history no longer holds every version after it: the latest state follows,
                // marked as a snapshot because versions are skipped; or (a history of no states)
                // the client has the latest already, and nothing follows until the next one.
                progress.lastSentVersion = lastEventID
            } else if lastEventID > timeline.latest.version {
                // The client has versions the instance does not: it says so, then the latest
                // state follows, to replace the client's.
                mailbox.pendingEvents = [ServerSentEvents.rewound(lastEventID: lastEventID, version: timeline.latest.version)]
            }
        }
        self.progress = Locked(progress)
        self.mailbox = Locked(mailbox)
    }

    /// Wakes the stream so it pulls the latest state.
    func wake() {
        mailbox.withLock { $0.stream }?.wake()
    }

    /// Queues an already-framed event and wakes the stream.
    func enqueue(event: [UInt8]) {
        let stream: HTTPStream? = mailbox.withLock { mailbox in
            guard !mailbox.closed else { return nil }
            if mailbox.pendingEvents.count >= Self.pendingEventLimit {
                mailbox.pendingEvents.removeFirst()
            }
            mailbox.pendingEvents.append(event)
            return mailbox.stream
        }
        stream?.wake()
    }

    func nextChunk(for stream: HTTPStream) -> HTTPStreamChunk {
        guard let onWrite else { return buildChunk(for: stream) }
        let before = progress.withLock { $0.lastSentVersion }
        let chunk = buildChunk(for: stream)
        if let after = progress.withLock({ $0.lastSentVersion }), after != before { onWrite(after) }
        return chunk
    }

    private func buildChunk(for stream: HTTPStream) -> HTTPStreamChunk {
        let (latest, endReason) = timeline.current
        let ending: StreamEndReason? = stream.isShuttingDown ? (endReason ?? .shutdown) : endReason
        let missed = catchUp(to: latest)
        let expired = credentialsExpire.map { ContinuousClock.now >= $0 } ?? false
        mailbox.withLock { if !$0.closed { $0.stream = stream } }
        return progress.withLock { progress -> HTTPStreamChunk in
            if progress.sentEnd { return .end }
            if expired, ending == nil {
                progress.sentEnd = true
                return .bytes(ServerSentEvents.credentialsExpired)
            }
            var bytes: [UInt8] = []
            if !progress.sentPrelude {
                progress.sentPrelude = true
                bytes.append(contentsOf: ServerSentEvents.retry(milliseconds: retryMilliseconds))
            }
            if !progress.replay.isEmpty {
                let batch = progress.replay.prefix(Self.replayBatch)
                for state in batch {
                    append(state, &progress, to: &bytes)
                }
                progress.replay.removeFirst(batch.count)
                if !progress.replay.isEmpty, ending == nil { return .bytes(bytes) }
                progress.replay.removeAll()
            }
            // The one other lock taken inside `progress`, and never the other way round.
            let events = mailbox.withLock { mailbox in
                defer { mailbox.pendingEvents.removeAll() }
                return mailbox.pendingEvents
            }
            for event in events { bytes.append(contentsOf: event) }
            for state in missed where progress.lastSentVersion.map({ state.version > $0 }) ?? false {
                append(state, &progress, to: &bytes)
            }
            if progress.lastSentVersion.map({ latest.version > $0 }) ?? true {
                // The common case, one new state and nothing else: hand over the event bytes
                // every subscriber shares instead of copying them.
                if bytes.isEmpty, ending == nil, !ServerSentEvents.isSnapshot(latest, after: progress.lastSentVersion) {
                    let event = self.event(for: latest, after: progress.lastSentState)
                    progress.lastSentVersion = latest.version
                    progress.lastSentState = latest
                    return .bytes(event)
                }
                append(latest, &progress, to: &bytes)
            }
            if let ending {
                bytes.append(contentsOf: ServerSentEvents.end(ending))
                progress.sentEnd = true
            }
            return bytes.isEmpty ? .idle : .bytes(bytes)
        }
    }

    /// Appends `state`'s event (marked as a snapshot when it skips versions) and records it as
    /// sent.
    private func append(_ state: any VersionedState, _ progress: inout Progress, to bytes: inout [UInt8]) {
        if ServerSentEvents.isSnapshot(state, after: progress.lastSentVersion) {
            bytes.append(contentsOf: ServerSentEvents.snapshotMarker)
        }
        bytes.append(contentsOf: event(for: state, after: progress.lastSentState))
        progress.lastSentVersion = state.version
        progress.lastSentState = state
    }

    /// `state`'s event as this stream's format sends it: in the patch format, the patch from the
    /// state sent before when that is the version just before and the patch is the smaller;
    /// otherwise the whole state. Either is framed once per version and shared.
    private func event(for state: any VersionedState, after sent: (any VersionedState)?) -> [UInt8] {
        if format == .patches, let sent, state.version == sent.version &+ 1,
            let patch = state.framedPatch(from: sent, by: ServerSentEvents.patchEvent(version:patch:))
        {
            return patch
        }
        return ServerSentEvents.stateEvent(state)
    }

    /// The versions between the last one sent and `latest` (exclusive), when there are a few
    /// and the history still holds them; empty otherwise.
    private func catchUp(to latest: any VersionedState) -> [any VersionedState] {
        let lastSent: UInt64? = progress.withLock { $0.replay.isEmpty ? $0.lastSentVersion : nil }
        guard let lastSent, latest.version > lastSent + 1, latest.version - lastSent <= Self.catchUpLimit,
            let missed = timeline.states(after: lastSent)
        else { return [] }
        return missed.filter { $0.version < latest.version }
    }

    func streamDidClose(_ stream: HTTPStream, reason: HTTPStreamCloseReason) {
        let first: Bool = mailbox.withLock { mailbox in
            defer {
                mailbox.closed = true
                mailbox.stream = nil
            }
            return !mailbox.closed
        }
        guard first else { return }
        timeline.detach(self)
        onClose()
    }
}
