package import Foundation

/// A row of `app_store.consumption_requests` (migration 0011): a refund request Apple asks the app
/// to answer with consumption information, and by when. Written once, with its notification;
/// `answered_date` is the team's column and never written here.
package struct ConsumptionRequestRecord: Hashable, Sendable, LedgerRow {
    package var notificationUUID: UUID
    package var environment: String
    /// The app's bundle ID (migration 0020).
    package var bundleId: String
    package var originalTransactionId: String
    package var transactionId: String?
    package var productId: String?
    package var appAccountToken: UUID?
    /// `data.consumptionRequestReason`.
    package var reason: String?
    /// When Apple sent it (its first send attempt, else its signedDate).
    package var sentDate: Date
    package var deadlineDate: Date

    package init(
        notificationUUID: UUID, environment: String, bundleId: String, originalTransactionId: String, transactionId: String?, productId: String?,
        appAccountToken: UUID?, reason: String?, sentDate: Date, deadlineDate: Date
    ) {
        self.notificationUUID = notificationUUID
        self.environment = environment
        self.bundleId = bundleId
        self.originalTransactionId = originalTransactionId
        self.transactionId = transactionId
        self.productId = productId
        self.appAccountToken = appAccountToken
        self.reason = reason
        self.sentDate = sentDate
        self.deadlineDate = deadlineDate
    }
}

/// A notification's part in a refund request's episode (migration 0022): Apple's request for
/// consumption information, or Apple's decision on it; a request signed after a decision, for the
/// same transaction, is a new request. Which types play which part is policy
/// (`NotificationTypePolicy` in Decisions), set on each record when it is made.
package enum RefundEpisodeRole: Hashable, Sendable {
    case request
    case decision
}

extension ConsumptionRequestRecord {
    /// `app_store.consumption_requests`' columns the tool writes.
    package static let columns: [LedgerColumn<Self>] = [
        .uuid("notification_uuid", \.notificationUUID),
        .text("environment", \.environment),
        .text("bundle_id", \.bundleId),
        .text("original_transaction_id", \.originalTransactionId),
        .text("transaction_id", \.transactionId),
        .text("product_id", \.productId),
        .uuid("app_account_token", \.appAccountToken),
        .text("reason", \.reason),
        .time("sent_date", \.sentDate),
        .time("deadline_date", \.deadlineDate),
    ]

    package static let blank = ConsumptionRequestRecord(
        notificationUUID: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)), environment: "", bundleId: "", originalTransactionId: "",
        transactionId: nil, productId: nil, appAccountToken: nil, reason: nil, sentDate: Date(timeIntervalSince1970: 0),
        deadlineDate: Date(timeIntervalSince1970: 0)
    )
}
