package import AppStoreServerModel
import Foundation

/// One refund request the answering pass looked at, as report.json's `answers` lists it: the
/// request, the deadline, what came of it (`outcome`: sent, no_facts, no_consent, invalid,
/// failed; in a dry run `would_send` for what a real run would send), and what was sent.
package struct RefundAnswerReport: Sendable, Codable, Hashable {
    package var transactionId: String
    package var originalTransactionId: String
    package var productId: String?
    /// The last moment to answer (ISO 8601).
    package var deadline: String
    package var outcome: String
    /// invalid: the facts' column and what is wrong with it; failed: Apple's answer, or what
    /// became of the request.
    package var detail: String?
    /// The body sent (or in a dry run, that would be sent).
    package var sent: ConsumptionInformation?
    /// Apple's HTTP status and errorCode, when Apple answered.
    package var appleStatus: Int?
    package var appleError: Int64?
    /// The rows of app_store.consumption_requests the answer marked answered (its repeated requests).
    package var requestsAnswered: Int

    package init(
        transactionId: String, originalTransactionId: String, productId: String? = nil, deadline: String, outcome: String, detail: String? = nil,
        sent: ConsumptionInformation? = nil, appleStatus: Int? = nil, appleError: Int64? = nil, requestsAnswered: Int = 0
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.deadline = deadline
        self.outcome = outcome
        self.detail = detail
        self.sent = sent
        self.appleStatus = appleStatus
        self.appleError = appleError
        self.requestsAnswered = requestsAnswered
    }

    /// A dry run's outcome for an answer a real run would send.
    package static let wouldSend = "would_send"

    /// Not sent for a reason a person must look at (exit code 3): `invalid` or `failed`.
    package var needsAPerson: Bool { outcome == "invalid" || outcome == "failed" }
    /// Not sent because Apple refuses answers about such a transaction (not recorded: no intent was formed).
    package static let notSupported = "not_supported"
}
