import Decisions
import Foundation
import Ledger
import LedgerModel
import AppStoreServerAPI
import Crypto
import SignedData

extension NotificationRecovery {
    /// Everything the run accumulates. The lists are spooled to files; a real run's memory of
    /// what it decided lasts the page after (the ledger holds the rest), a dry run's the whole run (it
    /// writes nothing, so later pages must see what earlier ones would have written).
    struct Tally {
        var counts = RecoveryReport.Counts()
        var memory = RecoveryPlanner.RunMemory()
        var missed: ReportList<RecoveryReport.Missed>
        var rejected: ReportList<RecoveryReport.Rejected>
        var byResult: [String: Int] = [:]
        var byHour: [String: Int] = [:]
        /// report.html's chart: failed first attempts and missed notifications by time step.
        var timeline: ReportTimeline
        var retryLater: [NotificationHistoryItem] = []
        var pages = 0
        /// Notifications an earlier, unfinished run handled, which this one skipped.
        var handledBefore = 0
        var queriesFinishedBefore = 0
        /// A dry run with a delivery target: the notifications it would record, for the list of what it would deliver.
        var wouldRecord: [(uuid: String, signedDate: Date)] = []
        /// A dry run: the refund requests and decisions it would record (for the answering pass).
        var refundEpisodes = RecoveryReport.LedgerOverlay()
        /// Digests of the payloads rejected so far (their signing input). A payload too broken to
        /// name its type cannot be skipped by the unfiltered pass as a priority query's: it is
        /// read twice, and handled (reported, kept) once.
        var rejectedPayloads: Set<SHA256Digest> = []
        /// Customers named by rejected payloads (unverified), for pass 2.
        var rejectedCustomers: Set<String> = []
        /// A dry run's recoveries: customer → the notifications it would record.
        var recoveredInDryRun: [String: [RecoveredNotification]] = [:]
        /// Where the window starts once Apple's 180-day (30 in Sandbox) limit overtook its start
        /// while the run paged: the queries from then on start there.
        var retention = RetentionMoves()

        mutating func reject(_ entry: RecoveryReport.Rejected) {
            rejected.append(entry)
            if let customer = entry.originalTransactionId { rejectedCustomers.insert(customer) }
        }

        /// Counts the page's decisions and lists the missed ones. A notification the plan meant to
        /// insert that the database already had (a live webhook recorded it meanwhile) counts as
        /// already recorded; a subscription change a newer live write overtook counts as stale.
        mutating func record(_ plan: RecoveryPlanner.PagePlan, outcome: LedgerBatchOutcome?, dryRun: Bool, delivering: Bool) {
            if dryRun { refundEpisodes.noteRefundEpisodes(of: plan.batch) }
            // The transaction each notification the batch records carries (a dry run's pass 2 judges them).
            let carried = dryRun
                ? Dictionary(plan.batch.notifications.map { ($0.notificationUUID, $0.transactionId) }, uniquingKeysWith: { first, _ in first }) : [:]
            for decision in plan.decisions {
                let action = RecoveryPlanner.settle(decision, batch: plan.batch, written: outcome)
                if action != .retryLater, let result = decision.firstAttemptResult, let attempt = decision.firstAttemptDate {
                    timeline.countFirstAttempt(at: attempt, result: result)
                }
                switch action {
                case .rejected:
                    counts.fetched += 1
                    counts.rejected += 1
                    reject(
                        .init(
                            notificationUUID: decision.notificationUUID, originalTransactionId: decision.unverifiedCustomer,
                            reason: decision.rejection?.reason.rawValue ?? "", detail: decision.rejection?.detail ?? ""
                        )
                    )
                    continue
                case .retryLater:
                    counts.fetched += 1
                    continue
                case .alreadyRecorded:
                    counts.fetched += 1
                    counts.alreadyRecorded += 1
                    continue
                case .applied, .stale:
                    counts.fetched += 1
                    counts.missed += 1
                    if action == .applied { counts.applied += 1 } else { counts.stale += 1 }
                }
                let label = dryRun ? (action == .applied ? "would-apply" : "would-apply-stale") : action.rawValue
                missed.append(
                    .init(
                        notificationUUID: decision.notificationUUID ?? "", notificationType: decision.notificationType ?? "",
                        subtype: decision.subtype, signedDate: decision.signedDate.map(ReportTimeline.iso) ?? "",
                        originalTransactionId: decision.originalTransactionId, firstAttemptResult: decision.firstAttemptResult, action: label,
                        firstAttemptDate: decision.firstAttemptDate.map(ReportTimeline.iso),
                        answerBy: NotificationType(rawValue: decision.notificationType ?? "").policy.carriesDeadline
                            ? decision.signedDate.map { ReportTimeline.iso(ConsumptionDeadline.deadline(firstAttempt: decision.firstAttemptDate, signedDate: $0)) } : nil
                    )
                )
                if dryRun, let customer = decision.originalTransactionId, let signed = decision.signedDate {
                    recoveredInDryRun[customer, default: []].append(
                        RecoveredNotification(
                            type: decision.notificationType ?? "", signedDate: signed, subtype: decision.subtype,
                            transactionId: decision.notificationUUID.flatMap(UUID.init(uuidString:)).flatMap { carried[$0] } ?? nil
                        )
                    )
                }
                if dryRun, delivering, let uuid = decision.notificationUUID, let signed = decision.signedDate {
                    wouldRecord.append((uuid, signed))
                }
                if let result = decision.firstAttemptResult, result != "SUCCESS" { byResult[result, default: 0] += 1 }
                if let attempt = decision.firstAttemptDate { byHour[NotificationRecovery.hour(attempt), default: 0] += 1 }
                if let date = decision.firstAttemptDate ?? decision.signedDate { timeline.countMissed(at: date, type: decision.notificationType ?? "") }
            }
        }
    }


    static func hour(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let start = calendar.dateInterval(of: .hour, for: date)?.start ?? date
        return ReportTimeline.iso(start)
    }
}
