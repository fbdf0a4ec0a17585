package import AppStoreServerAPI
package import Decisions
package import Foundation
package import Ledger
package import SignedData

extension ReconciliationRun {
    /// What to run.
    package struct Request: Sendable {
        package var kind: RunKind
        package var window: WindowChoice
        package var mode: RunMode
        /// Ask Apple only for notifications it never delivered.
        package var onlyFailures: Bool
        /// Pass 2 after pass 1.
        package var repair: Bool
        /// Accounts repaired at once in pass 2.
        package var repairConcurrency: Int
        package var shard: Shard
        /// How long a shard waits for the other shards' pass 1 before its pass 2.
        package var shardWait: Duration
        /// Ignore an unfinished earlier run's checkpoints and start over.
        package var fresh: Bool
        /// Write the run's metrics here (Prometheus text) when it ends, however it ends.
        package var metricsFile: String?
        /// Re-deliver every notification the run recovers to the team's webhook handler.
        package var deliverTo: DeliveryTarget?
        package var deliveryPolicy: DeliveryPolicy
        /// Recover only these notification types (the hourly refund-request check); nil: all.
        package var onlyTypes: [NotificationType]?
        /// Answer the open refund requests after pass 1, from these facts (`consumption-requests
        /// --answer`); nil: none is answered.
        package var answering: RefundAnswering.Settings?
        /// After the passes, audit a random sample of the ledger against Apple and mend what
        /// differs (`nightly`: the configuration's `audit`); nil, or a sample of 0: no audit.
        package var audit: NightlyAudit?

        package init(
            kind: RunKind, window: WindowChoice, mode: RunMode, onlyFailures: Bool = false, repair: Bool = true, repairConcurrency: Int = 8,
            shard: Shard = .whole, shardWait: Duration = .seconds(1800), fresh: Bool = false, metricsFile: String? = nil,
            deliverTo: DeliveryTarget? = nil, deliveryPolicy: DeliveryPolicy = DeliveryPolicy(), onlyTypes: [NotificationType]? = nil,
            answering: RefundAnswering.Settings? = nil
        ) {
            self.answering = answering
            self.onlyTypes = onlyTypes
            self.deliverTo = deliverTo
            self.deliveryPolicy = deliveryPolicy
            self.kind = kind
            self.window = window
            self.mode = mode
            self.onlyFailures = onlyFailures
            self.repair = repair
            self.repairConcurrency = repairConcurrency
            self.shard = shard
            self.shardWait = shardWait
            self.fresh = fresh
            self.metricsFile = metricsFile
        }

        package var dryRun: Bool { mode == .dryRun }
    }

    /// Which window a run recovers.
    package enum WindowChoice: Sendable {
        /// The window given: [start, end), an end in the future meaning now.
        case fixed(start: Date, end: Date)
        /// From the end of the last successful run of the request's kind (nightly, or the hourly
        /// refund-request check) less `overlap` (or
        /// `firstStart` when there is none; `.distantPast` for Apple's retention limit) to
        /// `settle` before now; the window of an unfinished run of that kind first, unless fresh.
        case nightly(firstStart: Date?, overlap: TimeInterval, settle: TimeInterval)
    }
}

extension AppStoreServerAPIConfiguration {
    /// The client configuration of one run: Apple's documented per-endpoint rates times
    /// `rateFactor`, of which this shard takes its share (all shards together stay within the
    /// app's budget), and each request tried at most `retryAttempts` times (at least once).
    package func forRun(shard: Shard, rateFactor: Double, retryAttempts: Int, rateLimitWait: Duration = .seconds(3600)) -> AppStoreServerAPIConfiguration {
        var configuration = self
        configuration.retryPolicy.maximumAttempts = max(1, retryAttempts)
        configuration.retryPolicy.maximumRateLimitWait = rateLimitWait
        configuration.requestsPerSecond = requestsPerSecond.mapValues { shard.share(of: $0 * rateFactor) }
        return configuration
    }
}
