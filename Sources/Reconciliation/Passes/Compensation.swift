import AppStoreServerAPI
import AppStoreServerModel
import Decisions
package import Foundation
import Ledger
import LedgerModel
import LedgerSupport
import Logging
import RemedyDecisions
import SignedData

/// `compensate` for one pair: the I/O of `CompensationRules` and `RenewalExtensionMachine`.
/// For a window, the hurt subscriptions from the ledger, one extension each (one at a time:
/// Apple allows 20 a second, and they are few); for the mass remedy, one mass extension per
/// product, followed to its end. A dry run reads the ledger, and sends and writes nothing.
package struct Compensation: Sendable {
    /// What to compensate.
    package enum Scope: Sendable, Hashable {
        /// The subscribers the window's missed notifications hurt. `again`: send even for a
        /// product the mass remedy of an overlapping window made good (`RemedyExclusion`).
        case window(start: Date, end: Date, minimumHours: Double, days: Int?, again: Bool = false)
        /// Every active subscriber of the products (nil: every product the ledger holds
        /// subscriptions of), `days` each; `intent` keys the request (the outage's window, kept as
        /// `window`). `again`: send even for a product the per-subscription remedy made good.
        case allActive(days: Int, productId: String?, intent: String, pollInterval: Duration, window: Range<Date>? = nil, again: Bool = false)
    }

    let client: AppStoreServerAPIClient
    let store: LedgerStore
    let pair: AppStorePair
    let logger: Logger
    let stop: StopRequest
    let now: @Sendable () -> Date
    /// Records the notifications Apple signed about the mass extensions since a date (their
    /// RENEWAL_EXTENSION/FAILURE and SUMMARY, from Get Notification History), so that the
    /// failures are retried by the same command even without `serve`; nil: only what the ledger
    /// already holds.
    var recordMassNotifications: MassExtending.RecordNotifications?

    func run(_ scope: Scope, dryRun: Bool, runId: UUID?) async throws -> CompensationResult {
        let endpoints: [Endpoint] = [.extendRenewalDate, .massExtendRenewalDate, .massExtensionStatus]
        let before = endpoints.reduce(0) { $0 + (client.counts.requests[$1] ?? 0) }
        var result: CompensationResult
        switch scope {
        case .window(let start, let end, let minimumHours, let days, let again):
            result = try await window(start: start, end: end, minimumHours: minimumHours, days: days, again: again, dryRun: dryRun, runId: runId)
        case .allActive(let days, let productId, let intent, let pollInterval, let window, let again):
            result = CompensationResult(days: days)
            let products: [String]
            if let productId { products = [productId] } else { products = try await store.subscriptionProducts(pair: pair) }
            let mass = MassExtending(
                client: client, store: store, pair: pair, logger: logger, stop: stop, now: now, recordNotifications: recordMassNotifications
            )
            let remedies = again ? [] : try await store.earlierRemedies(pair: pair)
            (result.massExtensions, result.extensions, result.stopped) = try await mass.run(
                products, days: days, intent: intent, window: window, remedies: remedies, dryRun: dryRun, runId: runId, pollInterval: pollInterval)
        }
        result.requestsToApple = endpoints.reduce(0) { $0 + (client.counts.requests[$1] ?? 0) } - before
        return result
    }

    func window(start: Date, end: Date, minimumHours: Double, days: Int?, again: Bool, dryRun: Bool, runId: UUID?) async throws -> CompensationResult {
        var result = CompensationResult(
            windowStart: start.formatted(.iso8601), windowEnd: end.formatted(.iso8601), minimumHours: minimumHours, days: days
        )
        let missed = try await store.missedGrants(
            pair: pair, start: start, end: end, types: CompensationRules.typesThatMayGrant, grantTypes: CompensationRules.typesThatGrant
        )
        result.missedGrants = missed.count
        result.recordedBeforeAccessEnded = CompensationRules.deniedNothing(missed)
        let remedies = again ? [] : try await store.earlierRemedies(pair: pair)
        for hurt in CompensationRules.hurt(missed, minimumHours: minimumHours, now: now()) {
            if stop.isRequested {
                result.stopped = true
                break
            }
            let identifier = CompensationRules.requestIdentifier(
                bundleId: pair.bundleId, environment: pair.environment, originalTransactionId: hurt.originalTransactionId, start: start, end: end
            )
            let facts = try await store.extensionFacts(
                pair: pair, originalTransactionId: hurt.originalTransactionId, requestIdentifier: identifier, extensionTypes: CompensationRules.typesThatExtend
            )
            var history = CompensationRules.history(facts, requestIdentifier: identifier, missed: hurt.notificationUUIDs, now: now())
            history.otherRemedy = RemedyExclusion.excluding(remedies, kind: .perSubscription, productId: hurt.productId, start: start, end: end, again: again)
                .map(RemedyExclusion.detail)
            let report = try await extend(
                hurt, history: history, requestIdentifier: identifier, days: CompensationRules.days(hoursDenied: hurt.hoursDenied, fixed: days),
                window: start..<end, dryRun: dryRun, runId: runId
            )
            result.extensions.append(report)
        }
        return result
    }

    /// One subscription's extension, through `RenewalExtensionMachine`: its trace recorded
    /// before sending, Apple's answer over it; its row keyed by `requestIdentifier` and `window`.
    func extend(
        _ hurt: CompensationRules.Hurt, history: ExtensionHistory, requestIdentifier: UUID, days: Int, window: Range<Date>, dryRun: Bool, runId: UUID?
    ) async throws -> RenewalExtensionReport {
        let (start, end) = (window.lowerBound, window.upperBound)
        var machine = RenewalExtensionMachine(hurt, history: history, requestIdentifier: requestIdentifier, days: days, dryRun: dryRun)
        var action = machine.start()
        while true {
            switch action {
            case .record(let row):
                try await store.recordRenewalExtension(row, pair: pair, start: start, end: end, runId: runId)
                action = machine.recorded()
            case .recordThenSend(let row, let request):
                try await store.recordRenewalExtension(row, pair: pair, start: start, end: end, runId: runId)
                do {
                    action = machine.sent(try await send(request, originalTransactionId: hurt.originalTransactionId))
                } catch let error as AppStoreAPIError {
                    // Apple refused the credentials: every request would be refused. Nothing
                    // was extended: this one is not sent (the next compensate sends it), and
                    // the run ends with the error (exit 78).
                    let refusal = AppleCallEnd(.answered(status: error.httpStatus, code: error.code?.rawValue, message: error.message, retryable: false))
                    if case .record(let pending) = machine.sent(refusal) {
                        try await store.recordRenewalExtension(pending, pair: pair, start: start, end: end, runId: runId)
                    }
                    throw error
                }
            case .done:
                return machine.report
            }
        }
    }

    /// Sends one extension; how it ended. Apple refusing the credentials (401) is thrown.
    func send(_ request: ExtendRenewalDateRequest, originalTransactionId: String) async throws -> AppleCallEnd {
        do {
            let answer = try await client.extendRenewalDate(originalTransactionId: originalTransactionId, request)
            guard answer.success != false else {
                return .refused(status: 200, code: nil, message: "Apple answered success false")
            }
            return .accepted(status: 200, effectiveDate: answer.effectiveDate.map { Date(timeIntervalSince1970: Double($0) / 1000) })
        } catch let error as AppStoreAPIError where error.isCredentialsProblem {
            throw error
        } catch {
            guard let failure = AppleCallFailure(clientError: error) else { throw error }
            return AppleCallEnd(failure)
        }
    }
}
