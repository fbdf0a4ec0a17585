package import Foundation

/// A refund request open for an answer: not answered, its deadline ahead, and not yet decided by
/// Apple (no REFUND or REFUND_DECLINED of its transaction signed after it). One per transaction:
/// the rows of one transaction's repeated requests are one request. It carries what the facts
/// query is given and the purchase's type as the ledger holds it.
package struct OpenRefundRequest: Sendable, Hashable {
    package var transactionId: String
    package var originalTransactionId: String
    package var appAccountToken: UUID?
    package var productId: String?
    /// The transaction's `product_type` in the ledger (nil: the ledger does not hold it).
    package var productType: String?
    /// The soonest deadline of its rows.
    package var deadline: Date
    /// When Apple signed its first request: a decision signed at or after it decides it.
    package var signedDate: Date
    /// Its rows in app_store.consumption_requests (0: a request a dry run would have recorded).
    package var rows: Int
    /// The last answer sent for it got no reply (its outcome unknown: a timeout after sending, or
    /// a run that ended between sending and recording), and Apple has not asked again since: it
    /// may have arrived, so it is not sent again until Apple does.
    package var awaitingApple: Bool
    /// The transaction's `inAppOwnershipType` in the ledger (Apple takes no answer about a family
    /// member's share or an ASSIGNED transaction).
    package var ownershipType: String?
    /// The transaction's signed payload carries `advancedCommerceInfo` (an Advanced Commerce API
    /// purchase: Apple takes no Send Consumption Information V2 answer about it).
    package var advancedCommerce = false

    package init(
        transactionId: String, originalTransactionId: String, appAccountToken: UUID?, productId: String?, productType: String?, deadline: Date,
        signedDate: Date, rows: Int, awaitingApple: Bool = false
    ) {
        self.awaitingApple = awaitingApple
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.appAccountToken = appAccountToken
        self.productId = productId
        self.productType = productType
        self.deadline = deadline
        self.signedDate = signedDate
        self.rows = rows
    }
}

/// What the tool did about one refund request, as a row of app_store.consumption_answers
/// (migration 0024) keeps it.
package struct ConsumptionAnswerRecord: Sendable, Hashable {
    package var transactionId: String
    /// sent, no_facts, no_consent, invalid, failed.
    package var outcome: String
    /// invalid: the column and what is wrong; failed: Apple's answer or what became of the request.
    package var detail: String?
    /// The body sent to Apple, as JSON; nil when nothing was sent.
    package var sent: String?
    /// Apple's HTTP status; nil when nothing was sent or no answer came.
    package var appleStatus: Int?
    /// Apple's errorCode, when it gave one.
    package var appleError: Int64?

    package init(transactionId: String, outcome: String, detail: String? = nil, sent: String? = nil, appleStatus: Int? = nil, appleError: Int64? = nil) {
        self.transactionId = transactionId
        self.outcome = outcome
        self.detail = detail
        self.sent = sent
        self.appleStatus = appleStatus
        self.appleError = appleError
    }

    /// The outcomes the table allows, in the order reports list them.
    package static let outcomes = ["sent", "no_facts", "no_consent", "invalid", "failed"]
}
