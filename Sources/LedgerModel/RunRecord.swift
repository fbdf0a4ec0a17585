/// What kind of run `app_store.runs.kind` records: the recovering commands own the run lock and
/// a row each.
package enum RunKind: String, Sendable, CaseIterable, Codable {
    /// `run`: a window given by hand.
    case run
    /// `nightly`: the time since the last successful nightly run.
    case nightly
    /// `consumption-requests`: the hourly check for refund requests (CONSUMPTION_REQUEST) a down
    /// receiver missed, since the last successful check; it holds a lock of its own.
    case consumptionRequests = "consumption-requests"
    /// `repair`: accounts repaired from Apple's present state, without a window (no window in
    /// its row); it shares `run`'s lock.
    case repair
    /// `compensate`: renewal-date extensions for the subscribers an outage hurt (no window in
    /// its row); it shares `run`'s lock, so that it never reads a window being recovered.
    case compensate
    /// `audit`: a random sample of the ledger's accounts compared with Apple (no window); with
    /// `--repair` it shares `run`'s lock, without it takes none and writes only its own row.
    case audit
}

/// How a run ended, as `app_store.runs.outcome` records it; the raw values are the column's
/// values and the `outcome` label of the metrics.
package enum RunOutcome: String, Sendable, CaseIterable, Codable {
    /// Started and not (yet) finished: in progress, or its process died.
    case running
    case succeeded
    /// Finished, with something a person must look at: payloads rejected or left for retry,
    /// accounts Apple could not answer for.
    case succeededWithRejections = "succeeded_with_rejections"
    /// Stopped on request (SIGTERM, SIGINT) after committing the batch in hand.
    case interrupted
    case failed
    /// Recorded as running by a process that died; marked by the next run that took the lock.
    case abandoned

    /// Whether the run did its whole job (with or without problems to look at).
    package var isSuccess: Bool { self == .succeeded || self == .succeededWithRejections }
}
