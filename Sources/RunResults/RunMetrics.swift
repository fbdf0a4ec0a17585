package import AppStoreServerModel
package import Decisions
package import Foundation
package import LedgerModel
package import SignedData

/// A run's figures as it ends, however it ends: what its metrics file says (rendered by Reports).
package struct RunMetrics: Sendable {
    package var kind: RunKind
    /// The App Store the run was of: every series carries it (`bundle_id`, `environment`), so
    /// that the files of several apps and environments, read by one collector, stay apart.
    package var pair: AppStorePair
    package var outcome: RunOutcome
    package var dryRun: Bool
    package var shard: String?
    package var startedAt: Date
    package var finishedAt: Date
    /// Nil when the run ended before it had counts (failed early).
    package var counts: RecoveryReport.Counts?
    package var api: APIRequestCounts
    /// Runs of this kind and App Store recorded in the ledger, by outcome (nil: the ledger could
    /// not be read).
    package var runsByOutcome: [String: Int]?
    package var lastSuccess: Date?
    /// Re-delivery to the team's handler (`--deliver-to`), when asked for.
    package var redelivery: RedeliverySummary?
    /// Refund requests answered (`consumption-requests --answer`) by outcome, when asked for.
    package var answers: [String: Int]?

    package init(
        kind: RunKind, pair: AppStorePair, outcome: RunOutcome, dryRun: Bool, shard: String?, startedAt: Date, finishedAt: Date, counts: RecoveryReport.Counts?,
        api: APIRequestCounts, runsByOutcome: [String: Int]?, lastSuccess: Date?, redelivery: RedeliverySummary? = nil,
        answers: [String: Int]? = nil
    ) {
        self.answers = answers
        self.redelivery = redelivery
        self.kind = kind
        self.pair = pair
        self.outcome = outcome
        self.dryRun = dryRun
        self.shard = shard
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.counts = counts
        self.api = api
        self.runsByOutcome = runsByOutcome
        self.lastSuccess = lastSuccess
    }
}
