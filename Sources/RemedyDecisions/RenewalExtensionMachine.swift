package import AppStoreServerModel
import Decisions
package import Foundation
package import LedgerModel

/// One hurt subscription's extension (`compensate`), as a machine: each event returns the next
/// action and the pass executes it. What an earlier compensate of the window settled (extended,
/// refused) is not sent again; one left pending (no answer came, the run ended, Apple said to try
/// later) is sent again as it was, the same identifier and days, before any other rule (Apple
/// extends once per identifier); a missed notification another window's compensate already
/// extended for is not compensated twice; a third extension in 365 days is skipped, not sent;
/// otherwise a trace (outcome `pending`) is recorded before the request goes out, so that a run
/// that dies before Apple's answer is recorded leaves a row the next compensate of the window
/// sends again.
package struct RenewalExtensionMachine: Sendable {
    package enum Action: Hashable, Sendable {
        /// Record this row; then `recorded()`.
        case record(RenewalExtensionRecord)
        /// Record this row (the trace), then send the request and tell the machine how it ended.
        case recordThenSend(RenewalExtensionRecord, ExtendRenewalDateRequest)
        /// Nothing more (a dry run writes nothing).
        case done
    }

    private enum State: Hashable, Sendable { case start, sending, recording, done }

    package let hurt: CompensationRules.Hurt
    package let dryRun: Bool
    private var request: ExtendRenewalDateRequest
    private let history: ExtensionHistory
    private var state = State.start
    package private(set) var report: RenewalExtensionReport

    package init(_ hurt: CompensationRules.Hurt, history: ExtensionHistory, requestIdentifier: UUID, days: Int, dryRun: Bool) {
        self.hurt = hurt
        self.history = history
        self.dryRun = dryRun
        self.request = ExtendRenewalDateRequest(
            extendByDays: Int32(days), extendReasonCode: .serviceIssueOrOutage, requestIdentifier: requestIdentifier.uuidString.lowercased()
        )
        self.report = RenewalExtensionReport(
            originalTransactionId: hurt.originalTransactionId, productId: hurt.productId, missedNotificationType: hurt.notificationType,
            missedNotificationUUID: hurt.notificationUUID.uuidString.lowercased(), missedSignedDate: OutageWindow.format(hurt.signedDate), hoursDenied: (hurt.hoursDenied * 10).rounded() / 10, extendByDays: days,
            requestIdentifier: request.requestIdentifier, outcome: RenewalExtensionReport.wouldExtend
        )
    }

    package var isDone: Bool { state == .done }

    package mutating func start() -> Action {
        precondition(state == .start, "started twice")
        if let earlier = history.earlier, earlier.isFinal {
            report.outcome = earlier.outcome
            report.earlier = true
            report.extendByDays = earlier.extendByDays
            report.effectiveDate = earlier.effectiveDate.map(OutageWindow.format)
            report.appleStatus = earlier.appleStatus
            report.appleError = earlier.appleError
            report.detail = "settled by an earlier compensate of this window: nothing sent" + (earlier.detail.map { " (\($0))" } ?? "")
            return finish()
        }
        if let earlier = history.earlier, earlier.outcome == "pending" || earlier.outcome == "not_sent" {
            // The very request again: its days as first sent, whatever the rules say now.
            request.extendByDays = Int32(earlier.extendByDays)
            report.extendByDays = earlier.extendByDays
            report.detail = "sent before with no answer recorded: sent again, the same requestIdentifier"
        } else if let rule = hurt.ineligible {
            // Apple refuses it by rule (ExtensionEligibility): listed and skipped, not sent, not a problem.
            report.outcome = "skipped"
            report.rule = rule.rawValue
            report.detail = rule.detail
            return finish()
        } else if let other = history.otherRemedy {
            report.outcome = "skipped"
            report.rule = RemedyExclusion.rule
            report.detail = other
            return finish()
        } else if history.compensatedElsewhere {
            report.outcome = "skipped"
            report.rule = "compensated_elsewhere"
            report.detail = "already extended for this missed notification by the compensate of another window: not compensated twice"
            return finish()
        } else if history.inLastYear >= CompensationRules.extensionsAllowedIn365Days {
            report.outcome = "skipped"
            report.rule = "limit_365_days"
            report.detail = "\(history.inLastYear) extensions in the last 365 days: Apple allows \(CompensationRules.extensionsAllowedIn365Days), so none was sent"
            return dryRun ? finish() : recordAndFinish(row(outcome: "skipped", detail: report.detail))
        }
        if dryRun { return finish() }
        state = .sending
        report.outcome = "pending"
        report.detail = report.detail ?? Self.traceDetail
        return .recordThenSend(row(outcome: "pending", detail: Self.traceDetail), request)
    }

    package mutating func sent(_ end: AppleCallEnd) -> Action {
        precondition(state == .sending, "sent out of turn")
        state = .recording
        switch end {
        case .accepted(let status, let effective):
            (report.outcome, report.detail, report.appleStatus) = ("extended", nil, status)
            report.effectiveDate = effective.map(OutageWindow.format)
            return .record(row(outcome: "extended", effectiveDate: effective, status: status))
        case .refused(let status, let code, let message):
            let detail = AppleCallEnd.describe(status: status, code: code, message: message)
            (report.outcome, report.detail, report.appleStatus, report.appleError) = ("refused", detail, status, code)
            return .record(row(outcome: "refused", status: status, error: code, detail: detail))
        case .outcomeUnknown(let cause):
            let detail = "no answer came (\(cause)): the next compensate of this window sends it again with the same requestIdentifier"
            (report.outcome, report.detail) = ("pending", detail)
            return .record(row(outcome: "pending", detail: detail))
        case .notTaken(let reason, let status, let code):
            // Certainly not extended: not counted as an extension anywhere.
            let detail = "\(reason); the next compensate of this window sends it"
            (report.outcome, report.detail, report.appleStatus, report.appleError) = ("not_sent", detail, status, code)
            return .record(row(outcome: "not_sent", status: status, error: code, detail: detail))
        }
    }

    package mutating func recorded() -> Action {
        precondition(state == .recording, "recorded out of turn")
        return finish()
    }

    package static let traceDetail = "sending: if this stays, the run ended before Apple's answer was recorded; the next compensate of this window sends it again"

    private mutating func finish() -> Action {
        state = .done
        return .done
    }

    private mutating func recordAndFinish(_ row: RenewalExtensionRecord) -> Action {
        state = .recording
        return .record(row)
    }

    private func row(outcome: String, effectiveDate: Date? = nil, status: Int? = nil, error: Int64? = nil, detail: String? = nil) -> RenewalExtensionRecord {
        RenewalExtensionRecord(
            originalTransactionId: hurt.originalTransactionId, requestIdentifier: UUID(uuidString: request.requestIdentifier)!,
            notificationUUID: hurt.notificationUUID, notificationUUIDs: hurt.notificationUUIDs, extendByDays: Int(request.extendByDays), reasonCode: Int(request.extendReasonCode.rawValue), outcome: outcome, effectiveDate: effectiveDate,
            hoursDenied: hurt.hoursDenied, appleStatus: status, appleError: error, detail: detail
        )
    }
}

/// One hurt subscription in the report (report.json `compensation.extensions`).
package struct RenewalExtensionReport: Sendable, Codable, Hashable {
    package var originalTransactionId: String
    package var productId: String?
    /// The missed notification that denied access longest, and when Apple signed it.
    package var missedNotificationType: String
    package var missedNotificationUUID: String
    package var missedSignedDate: String
    package var hoursDenied: Double
    package var extendByDays: Int
    package var requestIdentifier: String
    /// extended, refused, skipped, pending (may have reached Apple), not_sent (certainly did not:
    /// Apple's 429/5xx, a refused key); `would_extend` in a dry run.
    package var outcome: String
    /// Settled by an earlier compensate of the window (nothing sent now).
    package var earlier = false
    /// The new expiry Apple gave (ISO 8601).
    package var effectiveDate: String?
    package var appleStatus: Int?
    package var appleError: Int64?
    package var detail: String?
    /// For `skipped`: the rule (`ExtensionEligibility`'s name, `limit_365_days`, `compensated_elsewhere`).
    package var rule: String?

    package init(
        originalTransactionId: String, productId: String?, missedNotificationType: String, missedNotificationUUID: String, missedSignedDate: String,
        hoursDenied: Double, extendByDays: Int, requestIdentifier: String, outcome: String
    ) {
        self.missedNotificationUUID = missedNotificationUUID
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.missedNotificationType = missedNotificationType
        self.missedSignedDate = missedSignedDate
        self.hoursDenied = hoursDenied
        self.extendByDays = extendByDays
        self.requestIdentifier = requestIdentifier
        self.outcome = outcome
    }

    package static let wouldExtend = "would_extend"

    /// Refused by Apple (now or by an earlier compensate of the window), or left pending: exit code 3.
    /// Apple refused it, its answer is not known, it was not taken, or the other remedy of the
    /// outage made it good (the operator decides whether `--again` is right).
    package var needsAPerson: Bool {
        outcome == "refused" || outcome == "pending" || outcome == "not_sent" || (outcome == "skipped" && rule == RemedyExclusion.rule)
    }
}

/// A mass extension in the report (report.json `compensation.massExtensions`).
package struct MassExtensionReport: Sendable, Codable, Hashable {
    package var productId: String
    package var requestIdentifier: String
    package var extendByDays: Int
    /// requested (Apple took it, not complete when the run ended), complete, refused, not_sent
    /// (no answer, or Apple's 429/5xx: the same command sends it again), `would_request` in a dry run.
    package var outcome: String
    /// Followed from an earlier run's request (nothing sent now).
    package var resumed = false
    package var completeDate: String?
    package var succeededCount: Int64?
    package var failedCount: Int64?
    package var appleStatus: Int?
    package var appleError: Int64?
    package var detail: String?

    package init(productId: String, requestIdentifier: String, extendByDays: Int, outcome: String) {
        self.productId = productId
        self.requestIdentifier = requestIdentifier
        self.extendByDays = extendByDays
        self.outcome = outcome
    }

    package var needsAPerson: Bool {
        outcome == "refused" || outcome == "requested" || outcome == "not_sent" || (outcome == "skipped" && rule == RemedyExclusion.rule)
    }
    /// For `skipped`: the rule (`other_remedy`).
    package var rule: String?
}

/// The first step of one product's mass extension (`compensate --all-active`), from what
/// `app_store.mass_extensions` holds of the same intent (nil: nothing).
package enum MassExtensionStep: Hashable, Sendable {
    /// Apple completed it earlier: report its counts, send nothing.
    case reportComplete
    /// A dry run: list it (`requestedBefore`: Apple took it earlier and it is not complete).
    case list(requestedBefore: Bool)
    /// Apple took it earlier: follow its status, send nothing.
    case follow
    /// Record it, send it (the same identifier, if a request whose answer never came is being sent again), then follow it.
    case send

    package static func first(accepted: Bool?, complete: Bool?, dryRun: Bool) -> MassExtensionStep {
        if complete == true { return .reportComplete }
        if dryRun { return .list(requestedBefore: accepted == true) }
        return accepted == true ? .follow : .send
    }
}
