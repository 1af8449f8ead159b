import Dispatch
import Foundation
import Logging

// Leaving memory for good: one instance handed over to the node that asked for it, every
// instance handed to the other nodes, or the host stopping.

extension ReactorHost {
    /// Hands one instance over to the node that asked for it (the proxy routes its id there):
    /// takes it out of memory, so that requests here are sent on; lets the actions in flight
    /// settle (for at most ``handOverSettleLimit``; work still running then is cut off, and the
    /// next owner's recovery hook sees it); then commits its release and ends its streams with
    /// `moved`. Requests for it here are refused meanwhile, and for ``handOverGrace`` after, so
    /// that the asking node claims it rather than this one again.
    package func handOver(id: String) {
        guard let committer else { return }
        let first = leaving.withLock { $0.insert(id).inserted }
        guard first else { return }
        guard let instance = table.remove(id) else {
            // Claimed, not in memory (its last commit failed): the claim alone is released.
            committer.enqueue(.release(id: id))
            committer.afterCommit { [self] in forget(leaving: id) }
            return
        }
        let deadline = DispatchTime.now().uptimeNanoseconds &+ Self.handOverSettleLimit.nanoseconds
        finishHandOver(instance, deadline: deadline, committer: committer)
    }

    /// The longest an instance being handed over waits for its actions to settle.
    package static let handOverSettleLimit: Duration = .seconds(2)
    /// How long after handing an instance over this host still sends its requests on.
    package static let handOverGrace: Duration = .seconds(2)

    private func finishHandOver(_ instance: any HostedInstance, deadline: UInt64, committer: GroupCommitter) {
        if instance.isBusy && DispatchTime.now().uptimeNanoseconds < deadline {
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(10)) { [self] in
                finishHandOver(instance, deadline: deadline, committer: committer)
            }
            return
        }
        instance.dispose(nil)
        committer.enqueue(.touch(id: instance.id, lastActivity: configuration.wallClock()))
        committer.enqueue(.release(id: instance.id))
        committer.afterCommit { [self] in
            instance.timeline.end(.moved)
            logger.debug(
                "instance handed over to the node that asked for it",
                metadata: ["instance": "\(InstanceID.logLabel(instance.id))"])
            forget(leaving: instance.id)
        }
    }

    /// Takes `id` off the leaving list once the grace period has passed.
    private func forget(leaving id: String) {
        let grace = Int(clamping: Self.handOverGrace.nanoseconds)
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(grace)) { [leaving] in
            _ = leaving.withLock { $0.remove(id) }
        }
    }

    /// With a store that other nodes share, hands every instance over to them: activates and
    /// creates no more, takes the instances out of memory, commits what they did with their
    /// release, and only then ends their streams with `moved`, so that a client reconnecting
    /// through the proxy finds the session free to claim on another node. Returns once done.
    package func handOff() {
        guard let committer, configuration.store?.isShared == true else { return }
        handingOff.store(true, ordering: .relaxed)
        // Every instance is out of memory, refusing requests, while they settle: the other
        // nodes take them over only after this bound, whatever the stop's own grace.
        let leaving = takeAllOutOfMemory(endingStreams: nil, settlingWithin: Self.handOverSettleLimit)
        let committed = DispatchSemaphore(value: 0)
        committer.afterCommit { committed.signal() }
        committed.wait()
        for instance in leaving { instance.timeline.end(.moved) }
        logger.info("instances handed over to the other nodes", metadata: ["instances": "\(leaving.count)"])
    }

    /// Waits until every action queued so far is applied (stalled instances aside), or
    /// `timeout` passed.
    package func finishQueuedActions(within timeout: Duration) {
        drainPool?.waitUntilIdle(timeout: timeout)
    }

    /// Waits, for at most `limit`, until none of `instances` has an action in flight, so that
    /// what was acknowledged finishes here rather than in a recovery hook.
    private func waitUntilSettled(_ instances: [any HostedInstance], within limit: Duration) {
        // Real time: work in flight runs on real clocks, whatever clock the host was given.
        let deadline = DispatchTime.now().uptimeNanoseconds &+ limit.nanoseconds
        while instances.contains(where: \.isBusy) && DispatchTime.now().uptimeNanoseconds < deadline {
            usleep(2_000)
        }
    }

    /// Takes every instance out of memory: lets the actions in flight settle (for at most
    /// `limit`), disposes them (ending their streams with `reason`, if any) and queues their
    /// last activity and release for the store. Returns them.
    private func takeAllOutOfMemory(endingStreams reason: StreamEndReason?, settlingWithin limit: Duration) -> [any HostedInstance] {
        let instances = table.removeAll()
        waitUntilSettled(instances, within: limit)
        let wallClock = configuration.wallClock()
        for instance in instances {
            instance.dispose(reason)
            committer?.enqueue(.touch(id: instance.id, lastActivity: wallClock))
            committer?.enqueue(.release(id: instance.id))
        }
        return instances
    }

    /// Lets the actions in flight settle (for at most the configuration's `stopGrace`), ends
    /// every instance's streams, commits what is queued, and stops the threads.
    package func shutdown() {
        _ = takeAllOutOfMemory(endingStreams: .shutdown, settlingWithin: configuration.stopGrace)
        drainPool?.shutdown()
        committer?.stop()
        withdrawCountedAttempts()
        configuration.store?.close()
    }

    /// Takes back from the store the attempts this process counted (see ``AttemptLedger``): it
    /// ends cleanly, so none of those actions ended it, and one still pending (its run again
    /// could not commit) runs again in the next process rather than being reported abandoned.
    private func withdrawCountedAttempts() {
        guard let store = configuration.store else { return }
        let counted = context.attempts.takeAll()
        if counted.isEmpty { return }
        do {
            try store.withdrawAttempts(counted)
        } catch {
            logger.error(
                "could not take back the attempts this process counted to run pending actions again: the next process reports those still pending instead of running them",
                metadata: ["error": "\(error)", "sessions": "\(counted.count)"])
        }
    }
}
