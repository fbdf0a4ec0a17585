import AppStoreServerAPI
import AppStoreServerModel
import Decisions
import Foundation
import Ledger
import LedgerModel
import LedgerSupport
import Logging
import RemedyDecisions
import SignedData

/// The mass remedy (`compensate --all-active`): for each product, Extend Subscription Renewal
/// Dates for All Active Subscribers once per intent (its requestIdentifier derived from the app,
/// environment, product, days and the outage's window; Apple takes the same identifier again
/// without extending twice), every product sent first (Apple allows one a second), then Get Status
/// of Subscription Renewal Date Extensions for each until Apple says it is complete. Each step is
/// written to `app_store.mass_extensions` first, so that a run stopped or killed part-way is resumed
/// by the same command: it follows the requests instead of sending new ones.
struct MassExtending: Sendable {
    let client: AppStoreServerAPIClient
    let store: LedgerStore
    let pair: AppStorePair
    let logger: Logger
    let stop: StopRequest
    let now: @Sendable () -> Date
    let recordNotifications: RecordNotifications?

    /// Records the RENEWAL_EXTENSION notifications Apple signed since a date (verified, as pass 1
    /// records any), under the run's row.
    typealias RecordNotifications = @Sendable (_ since: Date, _ runId: UUID?) async throws -> Void

    /// One product's request as the run goes.
    struct Product: Sendable {
        var report: MassExtensionReport
        var record: MassExtensionRecord
        var following = false
    }

    func run(
        _ products: [String], days: Int, intent: String, window: Range<Date>?, remedies: [EarlierRemedy], dryRun: Bool, runId: UUID?, pollInterval: Duration
    ) async throws -> (reports: [MassExtensionReport], retries: [RenewalExtensionReport], stopped: Bool) {
        var started: [Product] = []
        for productId in products where !stop.isRequested {
            started.append(try await start(productId, days: days, intent: intent, window: window, remedies: remedies, dryRun: dryRun, runId: runId))
        }
        while started.contains(where: \.following), !stop.isRequested {
            for index in started.indices where started[index].following {
                started[index] = try await check(started[index], runId: runId)
            }
            if started.contains(where: \.following) { try await pause(pollInterval) }
        }
        for index in started.indices where started[index].following {
            started[index].report.detail = "stopped before Apple completed it: the same command follows it"
        }
        var retries: [RenewalExtensionReport] = []
        // Apple's FAILURE notifications for what completed, from Get Notification History: the
        // ledger may not hold them yet (no `serve`, or it was down).
        let completed = started.filter(\.record.complete)
        if !dryRun, !stop.isRequested, let recordNotifications, let since = completed.map(\.record.requestedAt).min() {
            try await recordNotifications(since, runId)
        }
        for product in completed where !stop.isRequested {
            retries += try await retryFailures(product.record, dryRun: dryRun, runId: runId)
        }
        return (started.map(\.report), retries, stop.isRequested)
    }

    /// Each subscriber a complete mass extension could not extend (Apple's RENEWAL_EXTENSION/FAILURE
    /// notifications the ledger recorded since it was requested: `serve`, or the next run) gets the
    /// single extension once (`CompensationRules.failureRetry`): reason 3, the mass request's days,
    /// an identifier derived from the mass request and the subscription, unless one of Apple's
    /// rules skips it. A later run of the same command finds the ones recorded since.
    func retryFailures(_ mass: MassExtensionRecord, dryRun: Bool, runId: UUID?) async throws -> [RenewalExtensionReport] {
        let failures = try await store.massExtensionFailures(pair: pair, productId: mass.productId, since: mass.requestedAt)
        let compensation = Compensation(client: client, store: store, pair: pair, logger: logger, stop: stop, now: now, recordMassNotifications: nil)
        let window = (mass.windowStart ?? mass.requestedAt)..<max(mass.windowEnd ?? mass.requestedAt, mass.windowStart ?? mass.requestedAt)
        var reports: [RenewalExtensionReport] = []
        var seen: Set<String> = []
        for failure in failures where seen.insert(failure.originalTransactionId).inserted {
            guard !stop.isRequested, let hurt = CompensationRules.failureRetry(failure, now: now()) else { continue }
            let identifier = CompensationRules.failureRetryIdentifier(massRequestIdentifier: mass.requestIdentifier, originalTransactionId: failure.originalTransactionId)
            let facts = try await store.extensionFacts(
                pair: pair, originalTransactionId: failure.originalTransactionId, requestIdentifier: identifier, extensionTypes: CompensationRules.typesThatExtend
            )
            let history = CompensationRules.history(facts, requestIdentifier: identifier, missed: [failure.notificationUUID], now: now())
            reports.append(try await compensation.extend(hurt, history: history, requestIdentifier: identifier, days: mass.extendByDays, window: window, dryRun: dryRun, runId: runId))
        }
        return reports
    }

    /// The product's first step: reported, listed, followed, or sent and then followed.
    func start(
        _ productId: String, days: Int, intent: String, window: Range<Date>?, remedies: [EarlierRemedy], dryRun: Bool, runId: UUID?
    ) async throws -> Product {
        let identifier = CompensationRules.massRequestIdentifier(bundleId: pair.bundleId, environment: pair.environment, productId: productId, intent: intent)
        let earlier = try await store.massExtension(pair: pair, productId: productId, requestIdentifier: identifier)
        var fresh = MassExtensionRecord(
            productId: productId, requestIdentifier: identifier, extendByDays: days, reasonCode: Int(ExtendReasonCode.serviceIssueOrOutage.rawValue),
            requestedAt: now()
        )
        (fresh.windowStart, fresh.windowEnd) = (window?.lowerBound, window?.upperBound)
        var product = Product(
            // Asked before with other days: the same request (its identifier leaves the days out), reported with its own.
            report: MassExtensionReport(
                productId: productId, requestIdentifier: identifier.uuidString.lowercased(), extendByDays: earlier?.record.extendByDays ?? days, outcome: "would_request"),
            record: earlier?.record ?? fresh
        )
        // Never asked: unless the per-subscription remedy of an overlapping window made the product good.
        if earlier == nil, let window,
            let other = RemedyExclusion.excluding(remedies, kind: .mass, productId: productId, start: window.lowerBound, end: window.upperBound, again: false)
        {
            product.report.outcome = "skipped"
            product.report.rule = RemedyExclusion.rule
            product.report.detail = RemedyExclusion.detail(other)
            return product
        }
        switch MassExtensionStep.first(accepted: earlier?.accepted, complete: earlier?.record.complete, dryRun: dryRun) {
        case .reportComplete:
            product.report.resumed = true
            product.report = Self.complete(product.report, product.record)
        case .list(let requestedBefore):
            if requestedBefore {
                product.report.outcome = "requested"
                product.report.resumed = true
                product.report.detail = "requested by an earlier compensate, not complete when it was last asked: a real run follows it"
            }
        case .follow:
            product.report.resumed = true
            product.report.outcome = "requested"
            product.following = true
        case .send:
            try await store.recordMassExtension(product.record, accepted: false, pair: pair, runId: runId)
            let request = MassExtendRenewalDateRequest(
                requestIdentifier: product.report.requestIdentifier, extendByDays: Int32(days), extendReasonCode: .serviceIssueOrOutage, productId: productId
            )
            do {
                _ = try await client.massExtendRenewalDate(request)
                try await store.recordMassExtension(product.record, accepted: true, pair: pair, runId: runId)
                product.report.outcome = "requested"
                product.following = true
            } catch let error as AppStoreAPIError where error.isCredentialsProblem {
                throw error
            } catch {
                guard let failure = AppleCallFailure(clientError: error) else { throw error }
                switch AppleCallEnd(failure) {
                case .refused(let status, let code, let message):
                    product.report.outcome = "refused"
                    (product.report.appleStatus, product.report.appleError) = (status, code)
                    product.report.detail = AppleCallEnd.describe(status: status, code: code, message: message)
                case .outcomeUnknown(let cause), .notTaken(let cause, _, _):
                    product.report.outcome = "not_sent"
                    product.report.detail = "not taken (\(cause)): the same command sends it again, the same requestIdentifier"
                case .accepted:
                    break
                }
            }
        }
        return product
    }

    /// One status check: complete (its counts recorded), not yet, or a failure (that product's
    /// alone: the others are followed on).
    func check(_ product: Product, runId: UUID?) async throws -> Product {
        var product = product
        let status: MassExtendRenewalDateStatusResponse
        do {
            status = try await client.massExtensionStatus(productId: product.record.productId, requestIdentifier: product.report.requestIdentifier)
        } catch let error as AppStoreAPIError where error.isCredentialsProblem {
            throw error
        } catch {
            product.following = false
            product.report.detail = "its status could not be read (\(error)): the same command follows it"
            return product
        }
        guard status.complete == true else {
            logger.info("mass extension not complete yet", metadata: ["productId": "\(product.record.productId)", "requestIdentifier": "\(product.report.requestIdentifier)"])
            return product
        }
        product.record.complete = true
        product.record.completeDate = status.completeDate.map { Date(timeIntervalSince1970: Double($0) / 1000) }
        product.record.succeededCount = status.succeededCount
        product.record.failedCount = status.failedCount
        try await store.recordMassExtension(product.record, accepted: true, pair: pair, runId: runId)
        product.following = false
        product.report = Self.complete(product.report, product.record)
        return product
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
