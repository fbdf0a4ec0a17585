package import AppStoreServerModel
import Decisions
package import Foundation
package import LedgerModel
import SignedData

/// The answering pass's decisions for one open refund request, as a machine: each event (the
/// facts read or their query failed, Apple's answer, the record written) returns the next
/// action, and the pass (`RefundAnswering` in Reconciliation) executes them. The rules of an
/// answer are `ConsumptionAnswerRules`'; this decides the order of things: the facts first,
/// nothing sent that the rules refuse, a trace recorded before anything is sent (a run that
/// dies between Apple's 202 and its own record leaves a `failed` row saying so, and the next
/// check answers again), and Apple's answer recorded over that trace.
package struct RefundAnswerMachine: Sendable {
    /// What to do next.
    package enum Action: Hashable, Sendable {
        /// Run the team's facts query for the request.
        case readFacts
        /// Record this row; the request is then done.
        case record(ConsumptionAnswerRecord)
        /// Record this row (the trace, outcome `failed` until Apple answers), then send the
        /// answer and tell the machine how sending ended (`sent`).
        case recordThenSend(ConsumptionAnswerRecord, ConsumptionInformation)
        /// Record Apple's answer over the trace; the request is then done.
        case recordOverTrace(ConsumptionAnswerRecord)
        /// Nothing to do: the request is done (a dry run writes nothing).
        case done
    }

    private enum State: Hashable, Sendable {
        case start, readingFacts, sending, recording, done
    }

    package let request: OpenRefundRequest
    package let dryRun: Bool
    private var state = State.start
    /// What the report says of the request, complete once the machine is done.
    package private(set) var report: RefundAnswerReport

    package init(_ request: OpenRefundRequest, dryRun: Bool) {
        self.request = request
        self.dryRun = dryRun
        self.report = RefundAnswerReport(
            transactionId: request.transactionId, originalTransactionId: request.originalTransactionId, productId: request.productId,
            deadline: OutageWindow.format(request.deadline), outcome: "failed"
        )
    }

    package var isDone: Bool { state == .done }

    package mutating func start() -> Action {
        precondition(state == .start, "started twice")
        // An answer whose reply never came may have reached Apple: Apple documents no identifier
        // that makes a repeat harmless (endpoints-that-change §8.2), so it is sent again only once
        // Apple asks again (a new CONSUMPTION_REQUEST for the transaction).
        if request.awaitingApple {
            report.detail = Self.awaitingDetail
            return finish()
        }
        if let rule = ConsumptionAnswerRules.unsupported(ownershipType: request.ownershipType, advancedCommerce: request.advancedCommerce) {
            report.outcome = ConsumptionAnswer.notSupported(rule).outcome
            report.detail = rule.detail
            return finish()
        }
        state = .readingFacts
        return .readFacts
    }

    /// The facts query's rows.
    package mutating func factsRead(_ rows: [ConsumptionFacts]) -> Action {
        precondition(state == .readingFacts, "facts read out of turn")
        let answer = ConsumptionAnswerRules.answer(rows: rows, productType: request.productType.map(ProductType.init(rawValue:)))
        switch answer {
        case .send(let information):
            report.sent = information
            if dryRun {
                report.outcome = RefundAnswerReport.wouldSend
                return finish()
            }
            state = .sending
            report.outcome = "failed"
            report.detail = Self.traceDetail
            return .recordThenSend(record(outcome: "failed", detail: Self.traceDetail, sent: information), information)
        case .noFacts, .noConsent:
            report.outcome = answer.outcome
            return dryRun ? finish() : recordAndFinish(record(outcome: answer.outcome))
        case .notSupported(let rule):
            report.outcome = answer.outcome
            report.detail = rule.detail
            return finish()
        case .invalid(let field, let reason):
            report.outcome = answer.outcome
            report.detail = "\(field) \(reason)"
            return dryRun ? finish() : recordAndFinish(record(outcome: answer.outcome, detail: report.detail))
        }
    }

    /// The facts query failed (its timeout included): this request's failure alone.
    package mutating func factsFailed(_ problem: String) -> Action {
        precondition(state == .readingFacts, "facts failed out of turn")
        report.outcome = "failed"
        report.detail = problem
        return dryRun ? finish() : recordAndFinish(record(outcome: "failed", detail: problem))
    }

    /// How sending ended.
    package mutating func sent(_ end: AppleCallEnd) -> Action {
        precondition(state == .sending, "sent out of turn")
        state = .recording
        let information = report.sent
        let row: ConsumptionAnswerRecord
        switch end {
        case .accepted(let status, _):
            report.outcome = "sent"
            report.detail = nil
            report.appleStatus = status
            row = record(outcome: "sent", sent: information, status: status)
        case .refused(let status, let code, let message):
            let detail = AppleCallEnd.describe(status: status, code: code, message: message) + "; sent again at the next check while the deadline is ahead"
            (report.outcome, report.detail, report.appleStatus, report.appleError) = ("failed", detail, status, code)
            row = record(outcome: "failed", detail: detail, sent: information, status: status, error: code)
        case .outcomeUnknown(let cause):
            let detail = "no answer came (\(cause)): Apple may have taken it; sent again only once Apple asks again (a new CONSUMPTION_REQUEST)"
            (report.outcome, report.detail) = ("failed", detail)
            row = record(outcome: "failed", detail: detail, sent: information)
        case .notTaken(let reason, let status, let code):
            let detail = "\(reason); sent at the next check while the deadline is ahead"
            (report.outcome, report.detail, report.appleStatus, report.appleError) = ("failed", detail, status, code)
            // What was sent, when Apple answered it.
            row = record(outcome: "failed", detail: detail, sent: status == nil ? nil : information, status: status, error: code)
        }
        return .recordOverTrace(row)
    }

    /// The row was written; `answered` rows of app_store.consumption_requests were marked answered.
    package mutating func recorded(answered: Int) -> Action {
        precondition(state == .recording, "recorded out of turn")
        report.requestsAnswered = answered
        return finish()
    }

    /// The trace's detail, left in the table only when the run ended between sending and recording.
    package static let traceDetail = "sending: if this stays, the run ended before Apple's answer was recorded; sent again only once Apple asks again"

    /// The report's detail for a request whose last answer got no reply.
    package static let awaitingDetail = "the last answer sent got no reply and may have reached Apple: not sent again until Apple asks again (a new CONSUMPTION_REQUEST); set answered_date to stop"

    private mutating func finish() -> Action {
        state = .done
        return .done
    }

    private mutating func recordAndFinish(_ row: ConsumptionAnswerRecord) -> Action {
        state = .recording
        return .record(row)
    }

    private func record(outcome: String, detail: String? = nil, sent: ConsumptionInformation? = nil, status: Int? = nil, error: Int64? = nil) -> ConsumptionAnswerRecord {
        ConsumptionAnswerRecord(
            transactionId: request.transactionId, outcome: outcome, detail: detail, sent: sent.map(Self.json), appleStatus: status, appleError: error
        )
    }

    /// The body as JSON, as it is sent.
    static func json(_ information: ConsumptionInformation) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? String(decoding: encoder.encode(information), as: UTF8.self)) ?? "{}"
    }
}

extension RefundAnswerMachine {
    /// The requests a dry run answers: the ledger's open ones and those its pass 1 would have
    /// recorded (a transaction's once, soonest deadline first), less any that a decision pass 1
    /// would have recorded (REFUND, REFUND_DECLINED signed at or after the request) decides, and
    /// any whose deadline has passed.
    package static func requests(
        open: [OpenRefundRequest], wouldRecord: [OpenRefundRequest], decisions: [String: Date], now: Date
    ) -> [OpenRefundRequest] {
        var byTransaction: [String: OpenRefundRequest] = [:]
        for request in open + wouldRecord where request.deadline > now {
            if let decided = decisions[request.transactionId], decided >= request.signedDate { continue }
            if var known = byTransaction[request.transactionId] {
                known.deadline = min(known.deadline, request.deadline)
                known.signedDate = min(known.signedDate, request.signedDate)
                known.rows += request.rows
                known.productType = known.productType ?? request.productType
                known.appAccountToken = known.appAccountToken ?? request.appAccountToken
                byTransaction[request.transactionId] = known
            } else {
                byTransaction[request.transactionId] = request
            }
        }
        return byTransaction.values.sorted { ($0.deadline, $0.transactionId) < ($1.deadline, $1.transactionId) }
    }
}
