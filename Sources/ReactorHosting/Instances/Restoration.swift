import Foundation
import ReactorCore

/// A stored session decoded for its reactor type: the state, and the pending actions sorted
/// into those that had not started, those a crash interrupted, those that no longer decode, and
/// those an earlier restart began to run again (abandoned).
struct Restoration<R: Reactor> {
    let stored: StoredSession
    let state: R.State
    /// The JSON of the restored version: the stored bytes, or the state encoded again when keys
    /// were filled from the initial state.
    let stateJSON: [UInt8]
    /// The keys filled from the initial state (see ``StoredStateDecoding``); usually none.
    let filledKeys: [String]
    /// The stored versions before the restored one that clients may be sent again (by
    /// `Last-Event-ID` and the history route), oldest first: those after the newest whose stored
    /// JSON is damaged (see ``JSONCoding/isSingleLineJSON(_:)``), which go out as they are stored.
    let history: [SessionBatch.Version]
    /// The versions of the stored history left out because one of them is damaged (that one
    /// and every older one), and the newest damaged version; nil when none is.
    let damagedHistory: (count: Int, through: UInt64)?
    let unstarted: [(seq: UInt64, action: R.Action, json: [UInt8])]
    let interrupted: [InterruptedAction<R.Action>]
    /// Acknowledged actions an earlier build stored that this build's `Action` cannot decode,
    /// with what does not decode: reported, never applied.
    let undecodable: [(seq: UInt64, reason: String)]
    /// Acknowledged actions that restarts began to run again as often as they may
    /// (``RecoveryAttempts/limit``), each time cut off by the end of the process, with how many
    /// times: reported, never run again.
    let abandoned: [(seq: UInt64, attempts: Int)]

    /// Whether its versions resume past some that clients may have been shown with other
    /// states, so that no version number is ever shown with two: those the process that served
    /// it last may have shown and never committed (``StoredSession/publishedAhead``), or those
    /// the store had before a backup was restored (``StoredSession/shownThrough``). The restored
    /// state becomes a version of its own past them.
    var skipsVersions: Bool { resumedVersion != stored.version }

    /// The version the instance resumes at.
    var resumedVersion: UInt64 { Self.resumedVersion(of: stored) }

    private static func resumedVersion(of stored: StoredSession) -> UInt64 {
        let aheadOfStore = stored.publishedAhead ? stored.version + GroupCommitter.versionsShownAheadLimit + 1 : stored.version
        let pastRestore = stored.shownThrough > stored.version ? stored.shownThrough + 1 : stored.version
        return max(aheadOfStore, pastRestore)
    }

    /// Decodes `stored`, filling keys its state lacks from `initialStateJSON`; throws
    /// ``HostingError/storedSessionIncompatible(_:)`` when the state still does not decode.
    /// `countedHere`: its actions whose attempt this process counted (see ``AttemptLedger``).
    init(_ stored: StoredSession, initialStateJSON: [UInt8], countedHere: Set<UInt64> = []) throws(HostingError) {
        self.stored = stored
        let decoded = try StoredStateDecoding.decode(R.State.self, stored: stored.state, initialState: initialStateJSON)
        state = decoded.state
        filledKeys = decoded.filledKeys
        // Stored bytes that decode yet could not go out as they are (Foundation's decoder takes a
        // control character left raw in a string; a state written by hand can span lines, which
        // would end an event's `data:` line early): the decoded state is encoded again instead.
        let storedAsSent = decoded.filledKeys.isEmpty && JSONCoding.isSingleLineJSON(stored.state)
        stateJSON = storedAsSent ? stored.state : JSONCoding.encodeState(decoded.state)
        // The restored version's own entry is its state, above, unless the versions resume past
        // it. The history is kept even then: nothing replays across the gap (a client that saw
        // any skipped version gets the state), but the history route still lists it.
        let replayable = Self.resumedVersion(of: stored) != stored.version ? stored.history[...] : stored.history.dropLast()
        if let damaged = replayable.lastIndex(where: { !JSONCoding.isSingleLineJSON($0.state) }) {
            history = Array(replayable[(damaged + 1)...])
            damagedHistory = (replayable.distance(from: replayable.startIndex, to: damaged) + 1, replayable[damaged].version)
        } else {
            history = Array(replayable)
            damagedHistory = nil
        }
        var unstarted: [(UInt64, R.Action, [UInt8])] = []
        var interrupted: [InterruptedAction<R.Action>] = []
        var undecodable: [(UInt64, String)] = []
        var abandoned: [(UInt64, Int)] = []
        let rawValue = RawValueDecoder(R.Action.self)
        for pending in stored.pendingActions {
            guard RecoveryAttempts.runsAgain(pending, countedHere: countedHere) else {
                abandoned.append((pending.seq, pending.attempts))
                continue
            }
            let action: R.Action
            do {
                action = try ActionDecoding.decode(R.Action.self, from: pending.action, rawValue: rawValue)
            } catch {
                guard case .invalidAction(let reason) = error else { throw error }
                undecodable.append((pending.seq, reason))
                continue
            }
            if pending.seq > stored.startedThrough {
                unstarted.append((pending.seq, action, pending.action))
            } else {
                interrupted.append(
                    InterruptedAction(
                        action: action, sequence: pending.seq,
                        reducedMutations: pending.producedVersions))
            }
        }
        self.unstarted = unstarted
        self.interrupted = interrupted
        self.undecodable = undecodable
        self.abandoned = abandoned
    }
}
