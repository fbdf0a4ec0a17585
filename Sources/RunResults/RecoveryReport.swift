import AppStoreServerModel
package import Decisions
import Foundation
package import LedgerModel
package import RemedyDecisions
import SignedData

/// What a recovery run found and did, for people (`report.md`) and machines (`report.json`).
/// The JSON's shape is documented in the README and is a contract.
package struct RecoveryReport: Sendable, Codable {
    package struct Run: Sendable, Codable {
        package var id: String
        package var mode: RunMode
        package var environment: String
        /// The app (its bundle ID); absent in reports written before it was added.
        package var bundleId: String?
        /// Absent for a `repair` run, which has no window.
        package var window: Window?
        package var startedAt: String
        package var finishedAt: String
        /// Absent for a `repair` run.
        package var plan: Plan?
        /// "INDEX/COUNT" for one shard of a sharded run (its part of the window in `plan`).
        package var shard: String?
        /// Set when the run took over from an earlier run of the same window that did not finish.
        package var resumed: Resumed?
        /// How long each pass took, in seconds (pass 2 absent when skipped).
        package var passOneSeconds: Double?
        package var passTwoSeconds: Double?

        package init(id: String, mode: RunMode, environment: String, bundleId: String? = nil, window: Window? = nil, startedAt: String, finishedAt: String, plan: Plan? = nil, shard: String? = nil, resumed: Resumed? = nil, passOneSeconds: Double? = nil, passTwoSeconds: Double? = nil) {
            self.id = id
            self.mode = mode
            self.environment = environment
            self.bundleId = bundleId
            self.window = window
            self.startedAt = startedAt
            self.finishedAt = finishedAt
            self.plan = plan
            self.shard = shard
            self.resumed = resumed
            self.passOneSeconds = passOneSeconds
            self.passTwoSeconds = passTwoSeconds
        }
    }

    /// What a run took over from an earlier one that died or was stopped.
    package struct Resumed: Sendable, Codable {
        /// The earlier runs whose checkpoints it started from.
        package var fromRuns: [String]
        /// Notifications they had handled and committed, which this run did not fetch again.
        package var notificationsHandledBefore: Int
        /// Queries of the plan they had finished.
        package var queriesFinishedBefore: Int
        /// Pass 1 was already complete: this run did pass 2 only.
        package var passOneDoneBefore: Bool

        package init(fromRuns: [String], notificationsHandledBefore: Int, queriesFinishedBefore: Int, passOneDoneBefore: Bool) {
            self.fromRuns = fromRuns
            self.notificationsHandledBefore = notificationsHandledBefore
            self.queriesFinishedBefore = queriesFinishedBefore
            self.passOneDoneBefore = passOneDoneBefore
        }
    }

    package struct Window: Sendable, Codable {
        package var start: String
        package var end: String

        package init(start: String, end: String) {
            self.start = start
            self.end = end
        }
    }

    package struct Plan: Sendable, Codable {
        package var priorityQueries: [String]
        /// `unfiltered`, or `none` for a plan of some types only (the hourly refund-request check).
        package var remainder: String
        package var remainderQueries: Int
        package var onlyFailures: Bool

        package init(priorityQueries: [String], remainder: String, remainderQueries: Int, onlyFailures: Bool) {
            self.priorityQueries = priorityQueries
            self.remainder = remainder
            self.remainderQueries = remainderQueries
            self.onlyFailures = onlyFailures
        }
    }

    /// Pass 2: one repaired (or checked) Apple account (decided by `AccountRepairMachine`).
    package typealias Repair = AccountRepairReport

    package struct Counts: Sendable, Codable, Hashable {
        package init() {}
        package var fetched = 0
        package var alreadyRecorded = 0
        package var missed = 0
        package var applied = 0
        package var stale = 0
        package var rejected = 0
        package var retryLater = 0
        package var apiRequests = 0
        /// Pass 2: accounts checked against Apple, those whose rows changed (were written), and
        /// those Apple could not answer for.
        package var customersChecked = 0
        package var customersRepaired = 0
        package var customersFailed = 0
        package var transactionHistoryRequests = 0
        package var subscriptionStatusesRequests = 0
        /// 429s Apple answered during the run (every endpoint, both passes), and by endpoint.
        /// Each was waited out until its `Retry-After` by every request to that endpoint.
        package var rateLimited = 0
        package var rateLimitedByEndpoint: [String: Int] = [:]
        /// Pass 2, per reason (GapReason's names, `overdue`, `recovered-in-window`, …): the
        /// accounts the reason selected and those of them whose rows changed. An account selected
        /// for several reasons counts under each: what each rule costs (requests) and finds.
        package var repairReasons: [String: ReasonCount] = [:]
        /// Pass 2: accounts changed that Apple owed a notification (`overdue`) and that no
        /// notification recovered in the run's window explains: losses outside any outage
        /// noticed, which the webhook did not record.
        package var lossesMendedOutsideWindow = 0
    }

    /// How many accounts one reason selected for pass 2, and how many of them it changed.
    package struct ReasonCount: Sendable, Codable, Hashable {
        package var selected = 0
        package var changed = 0

        package init(selected: Int = 0, changed: Int = 0) {
            self.selected = selected
            self.changed = changed
        }
    }

    package struct Missed: Sendable, Codable {
        package var notificationUUID: String
        package var notificationType: String
        package var subtype: String?
        /// A refund request Apple waits to have answered by a deadline (its type's policy).
        package var awaitsAnswer: Bool { NotificationType(rawValue: notificationType).policy.carriesDeadline }
        package var signedDate: String
        package var originalTransactionId: String?
        package var firstAttemptResult: String?
        /// `applied`, `stale`, `would-apply` or `would-apply-stale`.
        package var action: String
        /// When Apple first tried to send it (absent when history recorded no attempt).
        package var firstAttemptDate: String?
        /// CONSUMPTION_REQUEST only: the last moment to answer it (`ConsumptionDeadline`).
        package var answerBy: String?

        package init(notificationUUID: String, notificationType: String, subtype: String? = nil, signedDate: String, originalTransactionId: String? = nil, firstAttemptResult: String? = nil, action: String, firstAttemptDate: String? = nil, answerBy: String? = nil) {
            self.notificationUUID = notificationUUID
            self.notificationType = notificationType
            self.subtype = subtype
            self.signedDate = signedDate
            self.originalTransactionId = originalTransactionId
            self.firstAttemptResult = firstAttemptResult
            self.action = action
            self.firstAttemptDate = firstAttemptDate
            self.answerBy = answerBy
        }
    }

    package struct Rejected: Sendable, Codable {
        package var notificationUUID: String?
        /// Read from the unverified payload: whom pass 2 asks Apple about, nothing more.
        package var originalTransactionId: String?
        package var reason: String
        package var detail: String

        package init(notificationUUID: String? = nil, originalTransactionId: String? = nil, reason: String, detail: String) {
            self.notificationUUID = notificationUUID
            self.originalTransactionId = originalTransactionId
            self.reason = reason
            self.detail = detail
        }
    }

    package struct CustomerChange: Sendable, Codable {
        package var originalTransactionId: String
        package var before: SubscriptionRecord?
        package var after: SubscriptionRecord

        package init(originalTransactionId: String, before: SubscriptionRecord? = nil, after: SubscriptionRecord) {
            self.originalTransactionId = originalTransactionId
            self.before = before
            self.after = after
        }
    }

    package struct DeliveryFailures: Sendable, Codable {
        /// Missed notifications by the result of Apple's first delivery attempt.
        package var byFirstAttemptResult: [String: Int]
        /// Missed notifications by the hour (UTC) of the first delivery attempt.
        package var byHourOfFirstAttempt: [String: Int]

        package init(byFirstAttemptResult: [String: Int], byHourOfFirstAttempt: [String: Int]) {
            self.byFirstAttemptResult = byFirstAttemptResult
            self.byHourOfFirstAttempt = byHourOfFirstAttempt
        }
    }

    package var run: Run
    package var counts: Counts
    /// The lists grow with the outage: during a run they live in spool files (`ReportList`) and
    /// the report files are written from them a line at a time.
    package var missed: ReportList<Missed>
    package var rejected: ReportList<Rejected>
    package var customers: ReportList<CustomerChange>
    package var deliveryFailures: DeliveryFailures
    /// report.html's chart of the window; nil for a `repair` run, which has no window.
    package var timeline: ReportTimeline? = nil
    /// Pass 2; empty when it did not run.
    package var repairs = ReportList<Repair>([])
    /// Re-delivery to the team's webhook handler (`--deliver-to`); nil when not asked for.
    package var redelivery: RedeliverySummary?
    /// The refund requests the run answered (`consumption-requests --answer`); absent when not asked for.
    package var answers: [RefundAnswerReport]?
    /// An `import`'s lines; absent for every other run.
    package var imported: ImportResult?
    /// What `compensate` did; absent for every other run.
    package var compensation: CompensationResult?
    /// What an `audit` found; absent for every other run.
    package var audit: LedgerAuditReport?
    /// How the run ended (`app_store.runs.outcome`), and what in it needs a person: the run's
    /// result decides both (`RunResult.outcome`, `RunResult.problems`). Not part of the JSON.
    package var outcome = RunOutcome.succeeded
    package var problems = RunResult.Problems()

    package init(
        run: Run, counts: Counts, missed: ReportList<Missed>, rejected: ReportList<Rejected>, customers: ReportList<CustomerChange>,
        deliveryFailures: DeliveryFailures, timeline: ReportTimeline? = nil, repairs: ReportList<Repair> = ReportList<Repair>([]),
        redelivery: RedeliverySummary? = nil
    ) {
        self.run = run
        self.counts = counts
        self.missed = missed
        self.rejected = rejected
        self.customers = customers
        self.deliveryFailures = deliveryFailures
        self.timeline = timeline
        self.repairs = repairs
        self.redelivery = redelivery
    }

    /// What pass 1 wrote, or in a dry run would have written (`PassOneResult.overlay`).
    package typealias LedgerOverlay = Decisions.LedgerOverlay

    enum CodingKeys: String, CodingKey {
        case run, counts, missed, rejected, customers, deliveryFailures, repairs, redelivery, timeline, answers, compensation, audit
    }

    package var isDryRun: Bool { run.mode == .dryRun }

    /// Finished, but something needs a person: exit code 3.
    package var hasProblems: Bool { problems.any }

    /// Notifications the run was to re-deliver and did not (`RunResult.undelivered`).
    package var undelivered: Int { problems.undelivered }

    /// Counts as the JSON object `app_store.runs.counts` holds.
    package static func countsJSON(_ counts: Counts, audit: LedgerAuditReport? = nil) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        guard let audit else { return (try? String(decoding: encoder.encode(counts), as: UTF8.self)) ?? "{}" }
        return (try? String(decoding: encoder.encode(CountsWithAudit(counts: counts, audit: .init(audit))), as: UTF8.self)) ?? "{}"
    }

    /// An audit's row: its counts, and its figures under `audit` (serve's gauge reads `upperBound95`).
    private struct CountsWithAudit: Encodable {
        struct Figures: Encodable {
            var requested: Int
            var sampled: Int
            var differing: Int
            var upperBound95: Double?
            var unknownToApple: Int
            var notCompared: Int
            var cutShort: Bool
            var repaired: Bool

            init(_ audit: LedgerAuditReport) {
                requested = audit.requested
                sampled = audit.sampled
                differing = audit.differing
                upperBound95 = audit.upperBound95
                unknownToApple = audit.unknownToApple.count
                notCompared = audit.notCompared
                cutShort = audit.cutShort
                repaired = audit.repaired
            }
        }

        var counts: Counts
        var audit: Figures

        func encode(to encoder: any Encoder) throws {
            try counts.encode(to: encoder)
            enum Key: String, CodingKey { case audit }
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(audit, forKey: .audit)
        }
    }
}
