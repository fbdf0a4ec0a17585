package import Foundation
package import SignedData

/// What a run's checkpoints belong to: the same window, environment, filter and shard make the
/// same plan, so a run with this scope may resume from them.
package struct CheckpointScope: Hashable, Sendable {
    /// The App Store (app and environment) the run is of.
    package var pair: AppStorePair
    package var windowStart: Date
    package var windowEnd: Date
    package var onlyFailures: Bool
    /// "INDEX/COUNT"; "0/1" for an unsharded run.
    package var shard: String

    package init(pair: AppStorePair, windowStart: Date, windowEnd: Date, onlyFailures: Bool, shard: String) {
        self.pair = pair
        self.windowStart = windowStart
        self.windowEnd = windowEnd
        self.onlyFailures = onlyFailures
        self.shard = shard
    }
}

/// How far a run got through one query of its plan.
package struct QueryCheckpoint: Hashable, Sendable {
    /// The query's stable key (see `app_store.run_checkpoints.query`).
    package var query: String
    /// Items of the query handled and committed.
    package var position: Int
    /// Apple's token for the page after them; nil when the query must start over to get there.
    package var paginationToken: String?
    package var completed: Bool
    /// The run that wrote it (read back only).
    package var runId: UUID?

    package init(query: String, position: Int, paginationToken: String?, completed: Bool, runId: UUID? = nil) {
        self.query = query
        self.position = position
        self.paginationToken = paginationToken
        self.completed = completed
        self.runId = runId
    }

    /// The key of the row that says a whole pass 1 is done.
    package static let passOneKey = "pass-1"
}
