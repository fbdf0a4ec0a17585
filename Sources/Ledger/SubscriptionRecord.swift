import Foundation

/// A row of `app_store.subscriptions`: an auto-renewable subscription's state as of
/// `lastSignedDate`. Information signed earlier never replaces it.
package struct SubscriptionRecord: Hashable, Sendable, Codable, LedgerRow {
    package var originalTransactionId: String
    package var productId: String?
    /// Apple's 1 active, 2 expired, 3 billing retry, 4 billing grace period, 5 revoked.
    package var status: Int?
    package var expiresDate: Date?
    /// Apple's 0 off, 1 on.
    package var autoRenewStatus: Int?
    package var autoRenewProductId: String?
    package var isInBillingRetry: Bool?
    package var gracePeriodExpiresDate: Date?
    package var lastSignedDate: Date
    /// `Production` or `Sandbox` (nil in rows written before migration 0005 that it could not tell).
    package var environment: String?

    package init(
        originalTransactionId: String, productId: String?, status: Int?, expiresDate: Date?, autoRenewStatus: Int?,
        autoRenewProductId: String?, isInBillingRetry: Bool?, gracePeriodExpiresDate: Date?, lastSignedDate: Date,
        environment: String? = nil
    ) {
        self.environment = environment
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.status = status
        self.expiresDate = expiresDate
        self.autoRenewStatus = autoRenewStatus
        self.autoRenewProductId = autoRenewProductId
        self.isInBillingRetry = isInBillingRetry
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.lastSignedDate = lastSignedDate
    }
}


extension SubscriptionRecord {
    /// `app_store.subscriptions`' columns (and the database's `updated_at`). Compared: the
    /// subscription's state, which a repair checks against Apple's answer and lists when it differs.
    package static let columns: [LedgerColumn<Self>] = [
        .text("original_transaction_id", \.originalTransactionId, update: .key),
        .text("product_id", \.productId, compared: true),
        .integer("status", .smallint, \.status, compared: true),
        .time("expires_date", \.expiresDate, compared: true),
        .integer("auto_renew_status", .smallint, \.autoRenewStatus, compared: true),
        .text("auto_renew_product_id", \.autoRenewProductId, compared: true),
        .boolean("is_in_billing_retry", \.isInBillingRetry, compared: true),
        .time("grace_period_expires_date", \.gracePeriodExpiresDate, compared: true),
        .time("last_signed_date", \.lastSignedDate),
        .text("environment", \.environment, update: .keepWhenAbsent),
    ]

    package static let blank = SubscriptionRecord(
        originalTransactionId: "", productId: nil, status: nil, expiresDate: nil, autoRenewStatus: nil, autoRenewProductId: nil,
        isInBillingRetry: nil, gracePeriodExpiresDate: nil, lastSignedDate: Date(timeIntervalSince1970: 0)
    )
}
