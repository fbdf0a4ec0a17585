import AppStoreServerAPI
import AppStoreServerModel
import Decisions
import Foundation
import Ledger
package import LedgerModel
import Logging
import RemedyDecisions
import SignedData

/// Answers the open refund requests of one pair with Send Consumption Information, from the
/// team's facts (`consumption-requests --answer`): the I/O of `RefundAnswerMachine`, one request
/// at a time (they are few, and Apple allows 50 a second). Each request's facts query and
/// Apple's answer are that request's: a query that fails or runs past its timeout, or Apple's
/// refusal, makes it `failed` and the others go on. A dry run reads the facts and sends and
/// writes nothing.
package struct RefundAnswering: Sendable {
    /// What `--answer` brings to a pair's run.
    package struct Settings: Sendable, Hashable {
        /// The app's facts query (`refundRequests.facts`), read when the configuration was.
        package var query: RefundFactsQuery
        /// How long one request's facts query may run.
        package var timeout: Duration

        package init(query: RefundFactsQuery, timeout: Duration = .seconds(5)) {
            self.query = query
            self.timeout = timeout
        }
    }

    let client: AppStoreServerAPIClient
    let store: LedgerStore
    let pair: AppStorePair
    let logger: Logger
    let stop: StopRequest
    let now: @Sendable () -> Date

    /// Answers every open request (in a dry run, with those pass 1 would have recorded, `passOne`).
    func run(_ settings: Settings, dryRun: Bool, runId: UUID?, passOne: PassOneResult?) async throws -> RefundAnswersResult {
        let requestsBefore = client.counts.requests[.sendConsumptionInformation] ?? 0
        var open = try await store.openRefundRequests(pair: pair, now: now())
        if dryRun, let overlay = passOne?.overlay {
            let answered = try await store.answeredRefundRequests(pair: pair, transactions: overlay.refundRequests.map(\.transactionId))
            let recorded = overlay.refundRequests.filter { !answered.contains($0.transactionId) }.map { request in
                var request = request
                request.productType = request.productType ?? overlay.transactions[request.transactionId]?.productType
                return request
            }
            open = RefundAnswerMachine.requests(open: open, wouldRecord: recorded, decisions: overlay.refundDecisions, now: now())
        }
        var result = RefundAnswersResult()
        for request in open {
            if stop.isRequested {
                result.stopped = true
                break
            }
            result.answers.append(try await answer(request, settings: settings, dryRun: dryRun, runId: runId))
        }
        result.requestsToApple = (client.counts.requests[.sendConsumptionInformation] ?? 0) - requestsBefore
        return result
    }

    /// One request, through its machine.
    func answer(_ request: OpenRefundRequest, settings: Settings, dryRun: Bool, runId: UUID?) async throws -> RefundAnswerReport {
        var machine = RefundAnswerMachine(request, dryRun: dryRun)
        var action = machine.start()
        var trace: Int64?
        while true {
            switch action {
            case .readFacts:
                do {
                    let rows = try await store.refundFacts(
                        settings.query, transactionId: request.transactionId, originalTransactionId: request.originalTransactionId,
                        appAccountToken: request.appAccountToken, productId: request.productId, pair: pair, timeout: settings.timeout
                    )
                    action = machine.factsRead(rows)
                } catch let error as RefundFactsError {
                    logger.warning("refund facts query failed", metadata: ["transactionId": "\(request.transactionId)", "error": "\(error.problem)"])
                    action = machine.factsFailed(error.problem)
                }
            case .record(let row):
                action = machine.recorded(answered: try await store.recordConsumptionAnswer(row, pair: pair, runId: runId).answered)
            case .recordThenSend(let row, let information):
                trace = try await store.recordConsumptionAnswer(row, pair: pair, runId: runId).id
                do {
                    action = machine.sent(try await send(information, transactionId: request.transactionId))
                } catch let error as AppStoreAPIError {
                    // Apple refused the credentials: every answer would be refused. This one's
                    // refusal is recorded, and the pass ends with the error (exit 78).
                    let refusal = AppleCallEnd(.answered(status: error.httpStatus, code: error.code?.rawValue, message: error.message, retryable: false))
                    if case .recordOverTrace(let row) = machine.sent(refusal) {
                        try await store.recordConsumptionAnswer(row, pair: pair, runId: runId, replacing: trace)
                    }
                    throw error
                }
            case .recordOverTrace(let row):
                action = machine.recorded(answered: try await store.recordConsumptionAnswer(row, pair: pair, runId: runId, replacing: trace).answered)
            case .done:
                return machine.report
            }
        }
    }

    /// Sends one answer; how it ended. Apple refusing the credentials (401) is thrown: it ends
    /// the pass.
    func send(_ information: ConsumptionInformation, transactionId: String) async throws -> AppleCallEnd {
        do {
            return .accepted(status: try await client.sendConsumptionInformation(transactionId: transactionId, information))
        } catch let error as AppStoreAPIError where error.isCredentialsProblem {
            throw error
        } catch {
            guard let failure = AppleCallFailure(clientError: error) else { throw error }
            return AppleCallEnd(failure)
        }
    }
}
