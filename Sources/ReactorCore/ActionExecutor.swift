/// Where a reactor's queued actions are applied when the sending thread should not apply them
/// itself: threads that belong to whoever hosts the reactor (ReactorHosting's `DrainPool`).
///
/// The runtime owns no threads. By default the thread that finds a reactor idle applies its
/// actions; a host that gives the reactor an executor has each turn scheduled there instead.
@usableFromInline package protocol ActionExecutor: AnyObject, Sendable {
    /// Runs `turn` soon, on one of the executor's threads.
    func schedule(_ turn: any ExecutorTurn)
}

/// One reactor's turn at applying its queue, as an ``ActionExecutor`` runs it.
@usableFromInline package protocol ExecutorTurn: AnyObject, Sendable {
    /// Does the work; may schedule itself again before returning.
    func run()
    /// The turn has run for longer than the executor's stall timeout (`true`), or came back
    /// after that (`false`). Called with the executor's lock held: must not call back into it.
    func setStalled(_ stalled: Bool)
}
