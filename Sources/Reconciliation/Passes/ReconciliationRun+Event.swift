package import Decisions
import Foundation
package import SignedData

extension ReconciliationRun {
    /// What the run tells the person running it, as it goes.
    package enum Event: Sendable {
        /// The window is chosen; `passOne` is this shard's part of it when sharded.
        case recovering(window: OutageWindow, environment: AppStoreEnvironment, passOne: OutageWindow?, shard: Shard, dryRun: Bool)
        /// A nightly run found an unfinished nightly run's window and finishes it first.
        case resumingUnfinishedNightlyWindow
        /// Runs recorded as running whose process had died, now marked abandoned.
        case abandonedDeadRuns(Int)
        /// Pass 1 took over from an unfinished run of the same window.
        case resumed(RecoveryReport.Resumed)
        /// Pass 2 waits for these shards' pass 1.
        case waitingForShards([String])
        /// These shards had not finished pass 1 when the wait ran out; pass 2 goes on without them.
        case shardWaitExpired([String], waited: Duration)
        /// The metrics file could not be written (never the run's fate).
        case metricsNotWritten(path: String, error: String)
        /// Re-delivery to the team's handler begins: this many notifications are pending for it.
        case redelivering(target: String, pending: Int)
        /// Another process holds the target's delivery lock: what this run queued stays pending
        /// for it (or the next run, or `deliver`).
        case redeliveryBusy(target: String)
    }
}
