package import AppStoreServerModel
package import Decisions
package import Foundation
package import LedgerModel
package import SignedData

/// What pass 1 found and did, as a value: what pass 2 takes, and what the run's result holds.
/// Its lists grow with the outage, so they are spooled to files (`ReportList`).
package struct PassOneResult: Sendable {
    /// The run both passes belong to; nil in a dry run (nothing recorded).
    package var runId: UUID?
    package var dryRun: Bool
    package var window: OutageWindow
    package var plan: QueryPlan
    package var shard: Shard
    package var startedAt: Date
    package var finishedAt: Date
    /// Pass 1's counts (pass 2's fields are zero).
    package var counts = RecoveryReport.Counts()
    package var missed: ReportList<RecoveryReport.Missed>
    package var rejected: ReportList<RecoveryReport.Rejected>
    /// The subscription rows pass 1 changed (in a dry run, would have), before and after.
    package var customers: ReportList<RecoveryReport.CustomerChange>
    package var deliveryFailures = RecoveryReport.DeliveryFailures(byFirstAttemptResult: [:], byHourOfFirstAttempt: [:])
    package var timeline: ReportTimeline
    /// Set when this run took over an unfinished earlier one's checkpoints.
    package var resumed: RecoveryReport.Resumed?
    /// originalTransactionIds read from rejected payloads: unverified, so pass 2 asks Apple only
    /// about those the ledger already knows from verified data.
    package var rejectedCustomers: Set<String> = []
    /// A dry run's recoveries (customer → the notifications it would record, for pass 2's
    /// evidence, `RecoveryEvidence`): a real run's are in the ledger, where pass 2 finds them.
    package var recoveredInDryRun: [String: [RecoveredNotification]] = [:]
    /// What a dry run's pass 1 would have written, for pass 2 to compare against (empty in a
    /// real run: what it wrote is in the ledger).
    package var overlay = RecoveryReport.LedgerOverlay()
    /// Stopped on request before its end: the counts and lists hold what it did until then.
    package var stopped = false
    /// Where the window started from once Apple's retention limit overtook its start while the
    /// run paged (StartDateTooFarInPastError): what was signed before had left Apple's history.
    package var startMovedTo: Date?

    package init(
        runId: UUID?, dryRun: Bool, window: OutageWindow, plan: QueryPlan, shard: Shard = .whole, startedAt: Date, finishedAt: Date,
        missed: ReportList<RecoveryReport.Missed>, rejected: ReportList<RecoveryReport.Rejected>,
        customers: ReportList<RecoveryReport.CustomerChange>, timeline: ReportTimeline
    ) {
        self.runId = runId
        self.dryRun = dryRun
        self.window = window
        self.plan = plan
        self.shard = shard
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.missed = missed
        self.rejected = rejected
        self.customers = customers
        self.timeline = timeline
    }
}

/// What pass 2 found and did: one repair per account, and the counts derived from them once.
package struct PassTwoResult: Sendable {
    package var repairs: ReportList<RecoveryReport.Repair>
    package var startedAt: Date
    package var finishedAt: Date
    /// customersChecked, customersRepaired, customersFailed, the two request counts, and the
    /// payloads pass 2 rejected (the other fields are zero).
    package private(set) var counts = RecoveryReport.Counts()

    package init(repairs: ReportList<RecoveryReport.Repair>, startedAt: Date, finishedAt: Date) {
        self.repairs = repairs
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        for repair in repairs {
            counts.customersChecked += 1
            if repair.outcome == .repaired { counts.customersRepaired += 1 }
            if repair.outcome == .failed { counts.customersFailed += 1 }
            counts.transactionHistoryRequests += repair.transactionHistoryRequests
            counts.subscriptionStatusesRequests += repair.subscriptionStatusesRequests
            counts.rejected += repair.rejected
            let changed = repair.outcome == .repaired
            for reason in repair.reasons {
                counts.repairReasons[reason, default: .init()].selected += 1
                if changed { counts.repairReasons[reason, default: .init()].changed += 1 }
            }
            if changed, repair.reasons.contains(GapReason.overdue.rawValue), !repair.reasons.contains(GapReason.recoveredInWindow.rawValue) {
                counts.lossesMendedOutsideWindow += 1
            }
        }
    }
}

/// What one run did, as a value: pass 1's outcome per notification, pass 2's per account, the
/// re-delivery, Apple's 429s, and how it ended. The counts, the outcome `app_store.runs`
/// records and the exit status are derived from it here, once; the report files, the metrics
/// file, the summary line and the run's row are renderings of it.
package struct RunResult: Sendable {
    /// How the run ended when it returned (a run that failed throws why instead).
    package enum Ending: String, Sendable, Equatable {
        /// Every step asked for went to its end.
        case finished
        /// Stopped on request (SIGTERM, SIGINT) after committing the batch in hand: running the
        /// same command again finishes the work, nothing committed is lost or written twice.
        case stopped
    }

    /// The kind `app_store.runs` records (`repair` for a run of accounts alone).
    package var kind: RunKind
    /// The run's ID: its row in `app_store.runs`, unless a dry run (which records nothing).
    package var id: UUID
    package var mode: RunMode
    package var environment: AppStoreEnvironment
    /// The app of the run (nil only where a caller did not say).
    package var bundleId: String?
    package var shard: Shard
    package var startedAt: Date
    package var finishedAt: Date
    /// nil for a `repair` run, which recovers no window.
    package var passOne: PassOneResult?
    /// nil when pass 2 was not asked for, or did not start.
    package var passTwo: PassTwoResult?
    /// Re-delivery to the team's handler (`--deliver-to`); nil when not asked for.
    package var redelivery: RedeliverySummary?
    /// The refund requests answered (`consumption-requests --answer`); nil when not asked for.
    package var answers: RefundAnswersResult?
    /// What an `import` did with its input's lines; nil for every other run.
    package var imported: ImportResult?
    /// What `compensate` did; nil for every other run.
    package var compensated: CompensationResult?
    /// What an `audit` found; nil for every other run.
    package var audited: LedgerAuditReport?
    /// What the API client did during the run (its 429s are the run's).
    package var api = APIRequestCounts()
    package var ending: Ending

    package init(
        kind: RunKind, id: UUID, mode: RunMode, environment: AppStoreEnvironment, bundleId: String? = nil, shard: Shard = .whole, startedAt: Date,
        finishedAt: Date,
        passOne: PassOneResult? = nil, passTwo: PassTwoResult? = nil, redelivery: RedeliverySummary? = nil, api: APIRequestCounts = APIRequestCounts(),
        ending: Ending = .finished
    ) {
        self.kind = kind
        self.id = id
        self.mode = mode
        self.environment = environment
        self.bundleId = bundleId
        self.shard = shard
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.passOne = passOne
        self.passTwo = passTwo
        self.redelivery = redelivery
        self.api = api
        self.ending = ending
    }

    package var dryRun: Bool { mode == .dryRun }

    /// The run's row in `app_store.runs`; nil in a dry run.
    package var runId: UUID? { dryRun ? nil : id }

    /// Both passes' counts and the run's 429s, as `app_store.runs.counts`, report.json and the
    /// metrics give them.
    package var counts: RecoveryReport.Counts {
        var counts = passOne?.counts ?? RecoveryReport.Counts()
        if let two = passTwo?.counts {
            counts.customersChecked = two.customersChecked
            counts.customersRepaired = two.customersRepaired
            counts.customersFailed = two.customersFailed
            counts.transactionHistoryRequests = two.transactionHistoryRequests
            counts.subscriptionStatusesRequests = two.subscriptionStatusesRequests
            counts.rejected += two.rejected
            counts.repairReasons = two.repairReasons
            counts.lossesMendedOutsideWindow = two.lossesMendedOutsideWindow
        }
        counts.rateLimited = api.rateLimited
        counts.rateLimitedByEndpoint = Dictionary(uniqueKeysWithValues: api.rateLimitedByEndpoint.map { ($0.key.rawValue, $0.value) })
        return counts
    }

    /// Notifications the run was to re-deliver and did not (pending for the handler when it
    /// ended; 0 in a dry run, or when another process was delivering to the handler).
    package var undelivered: Int {
        guard let redelivery, !dryRun, !redelivery.leftToAnotherDeliverer else { return 0 }
        return redelivery.pending
    }

    /// What a person must look at in a finished run.
    package struct Problems: Sendable, Equatable {
        package var rejected = 0
        package var retryLater = 0
        package var customersFailed = 0
        package var undelivered = 0
        /// Refund requests not answered for a reason a person must look at (invalid facts, Apple's refusal).
        package var answersNotSent = 0
        /// An import's lines not imported (garbled, unknown to Apple, an invalid order).
        package var linesNotImported = 0
        /// Extensions Apple refused, or whose outcome is not known yet (`compensate`).
        package var extensionsNotMade = 0
        /// Accounts an audit found differing from Apple and left as they are (no `--repair`).
        package var accountsDiffering = 0
        package var any: Bool {
            rejected + retryLater + customersFailed + undelivered + answersNotSent + linesNotImported + extensionsNotMade + accountsDiffering > 0
        }
    }

    package var problems: Problems {
        let counts = counts
        return Problems(
            rejected: counts.rejected, retryLater: counts.retryLater, customersFailed: counts.customersFailed, undelivered: undelivered,
            answersNotSent: answers?.needingAPerson ?? 0, linesNotImported: imported?.linesNotImported ?? 0,
            extensionsNotMade: compensated?.needingAPerson ?? 0,
            accountsDiffering: audited.map { $0.repaired ? 0 : $0.differing } ?? 0
        )
    }

    /// How the run ended, as `app_store.runs.outcome` and the metrics record it.
    package var outcome: RunOutcome {
        switch ending {
        case .stopped: .interrupted
        case .finished: problems.any ? .succeededWithRejections : .succeeded
        }
    }
}
