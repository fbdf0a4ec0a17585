import AppStoreServerAPI
import AppStoreServerModel
import Decisions
import Foundation
import Ledger
import LedgerModel
import LedgerSupport
import Logging
import SignedData

/// The mass remedy for one product (`compensate --all-active`): Extend Subscription Renewal
/// Dates for All Active Subscribers once per intent (its requestIdentifier derived from the app,
/// environment, product, days and the intent's key; Apple takes the same identifier again without
/// extending twice), then Get Status of Subscription Renewal Date Extensions until Apple says it
/// is complete. Each step is written to `app_store.mass_extensions` first, so that a run stopped
/// or killed part-way is resumed by the same command: it follows the request instead of sending
/// a new one.
struct MassExtending: Sendable {
    let client: AppStoreServerAPIClient
    let store: LedgerStore
    let pair: AppStorePair
    let logger: Logger
    let stop: StopRequest
    let now: @Sendable () -> Date

    func extend(_ productId: String, days: Int, intent: String, dryRun: Bool, runId: UUID?, pollInterval: Duration) async throws -> MassExtensionReport {
        let identifier = CompensationRules.massRequestIdentifier(bundleId: pair.bundleId, environment: pair.environment, productId: productId, days: days, intent: intent)
        var report = MassExtensionReport(productId: productId, requestIdentifier: identifier.uuidString.lowercased(), extendByDays: days, outcome: "would_request")
        let earlier = try await store.massExtension(pair: pair, productId: productId, requestIdentifier: identifier)
        var record = earlier?.record ?? MassExtensionRecord(
            productId: productId, requestIdentifier: identifier, extendByDays: days, reasonCode: Int(ExtendReasonCode.serviceIssueOrOutage.rawValue), requestedAt: now()
        )
        if let earlier, earlier.record.complete {
            report.resumed = true
            return Self.complete(report, record)
        }
        if dryRun {
            if earlier?.accepted == true {
                report.outcome = "requested"
                report.resumed = true
                report.detail = "requested by an earlier compensate, not complete when it was last asked: a real run follows it"
            }
            return report
        }
        if earlier?.accepted == true {
            report.resumed = true
        } else {
            try await store.recordMassExtension(record, accepted: false, pair: pair, runId: runId)
            let request = MassExtendRenewalDateRequest(
                requestIdentifier: report.requestIdentifier, extendByDays: Int32(days), extendReasonCode: .serviceIssueOrOutage, productId: productId
            )
            do {
                _ = try await client.massExtendRenewalDate(request)
            } catch {
                switch try Compensation.ending(error) {
                case .refused(let status, let code, let message):
                    report.outcome = "refused"
                    (report.appleStatus, report.appleError) = (status, code)
                    report.detail = "Apple answered HTTP \(status)" + (code.map { ", error \($0)" } ?? "") + (message.map { ": \($0.prefix(200))" } ?? "")
                case .outcomeUnknown(let cause), .notSent(let cause):
                    report.outcome = "requested"
                    report.detail = "no answer came (\(cause)): the same command sends it again, the same requestIdentifier"
                case .extended:
                    break
                }
                return report
            }
            try await store.recordMassExtension(record, accepted: true, pair: pair, runId: runId)
        }
        report.outcome = "requested"
        while !stop.isRequested {
            let status = try await client.massExtensionStatus(productId: productId, requestIdentifier: report.requestIdentifier)
            if status.complete == true {
                record.complete = true
                record.completeDate = status.completeDate.map { Date(timeIntervalSince1970: Double($0) / 1000) }
                record.succeededCount = status.succeededCount
                record.failedCount = status.failedCount
                try await store.recordMassExtension(record, accepted: true, pair: pair, runId: runId)
                return Self.complete(report, record)
            }
            logger.info("mass extension not complete yet", metadata: ["productId": "\(productId)", "requestIdentifier": "\(report.requestIdentifier)"])
            try await pause(pollInterval)
        }
        report.detail = "stopped before Apple completed it: the same command follows it"
        return report
    }

    /// Waits `interval`, or less when a stop is asked for.
    func pause(_ interval: Duration) async throws {
        var left = interval
        while left > .zero, !stop.isRequested {
            let step = min(left, .seconds(1))
            try await Task.sleep(for: step)
            left -= step
        }
    }

    static func complete(_ report: MassExtensionReport, _ record: MassExtensionRecord) -> MassExtensionReport {
        var report = report
        report.outcome = "complete"
        report.completeDate = record.completeDate?.formatted(.iso8601)
        report.succeededCount = record.succeededCount
        report.failedCount = record.failedCount
        return report
    }
}
