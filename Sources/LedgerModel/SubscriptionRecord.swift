package import Foundation

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
    /// The app's bundle ID (migration 0020).
    package var bundleId: String?
    // What a backend queries (migration 0006); not in the initializer, set where they are known.
    /// From the subscription's latest transaction, else its renewal info: the app's UUID for the customer.
    package var appAccountToken: UUID? = nil
    package var subscriptionGroupIdentifier: String? = nil
    /// `PURCHASED` or `FAMILY_SHARED`.
    package var inAppOwnershipType: String? = nil
    // From the renewal info: the next renewal.
    /// Apple's 1 cancelled, 2 billing error, 3 price increase not consented, 4 product unavailable, 5 other.
    package var expirationIntent: Int? = nil
    /// Apple's 0 not responded, 1 consented or notified.
    package var priceIncreaseStatus: Int? = nil
    /// Milliunits of `currency`.
    package var renewalPrice: Int64? = nil
    package var currency: String? = nil
    /// Apple's 1 introductory, 2 promotional, 3 offer code, 4 win-back.
    package var offerType: Int? = nil
    package var offerIdentifier: String? = nil
    /// When Apple signed the renewal info the row's renewal fields came from (migration 0019;
    /// nil before it, and where no renewal info was ever seen). A notification older than the row
    /// may still carry renewal info newer than this: the row's latest notification had none.
    package var renewalSignedDate: Date? = nil
    // Migration 0023.
    /// From the renewal info: when the most recent purchase expires and the next renewal is due.
    package var renewalDate: Date? = nil
    /// From the renewal info: the next renewal's offer, its payment mode and its duration (as on transactions).
    package var offerDiscountType: String? = nil
    package var offerPeriod: String? = nil
    /// The app download's transaction ID: the transaction's, else the renewal info's.
    package var appTransactionId: String? = nil
    /// From the renewal info: the win-back offers the customer may redeem now (Apple's order).
    package var eligibleWinBackOfferIds: [String]? = nil
    /// The subscription this one continues (`previousOriginalTransactionId`: its
    /// originalTransactionId before Apple migrated it), kept once any of its transactions said it.
    package var previousOriginalTransactionId: String? = nil

    package init(
        originalTransactionId: String, productId: String?, status: Int?, expiresDate: Date?, autoRenewStatus: Int?,
        autoRenewProductId: String?, isInBillingRetry: Bool?, gracePeriodExpiresDate: Date?, lastSignedDate: Date,
        environment: String? = nil, bundleId: String? = nil
    ) {
        self.environment = environment
        self.bundleId = bundleId
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
    /// `app_store.subscriptions`' columns (and the database's `updated_at`). Compared: every
    /// column Apple's payloads set but the signing time, which a repair checks against Apple's
    /// answer and lists when it differs.
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
        .text("environment", \.environment, update: .key, compared: true),
        .text("bundle_id", \.bundleId, update: .key),
        .uuid("app_account_token", \.appAccountToken, compared: true),
        .text("subscription_group_identifier", \.subscriptionGroupIdentifier, compared: true),
        .text("in_app_ownership_type", \.inAppOwnershipType, compared: true),
        .integer("expiration_intent", .smallint, \.expirationIntent, compared: true),
        .integer("price_increase_status", .smallint, \.priceIncreaseStatus, compared: true),
        .integer("renewal_price", .bigint, \.renewalPrice, compared: true),
        .text("currency", \.currency, compared: true),
        .integer("offer_type", .smallint, \.offerType, compared: true),
        .text("offer_identifier", \.offerIdentifier, compared: true),
        .time("renewal_signed_date", \.renewalSignedDate),
        .time("renewal_date", \.renewalDate, compared: true),
        .text("offer_discount_type", \.offerDiscountType, compared: true),
        .text("offer_period", \.offerPeriod, compared: true),
        .text("app_transaction_id", \.appTransactionId, compared: true),
        .texts("eligible_win_back_offer_ids", \.eligibleWinBackOfferIds, compared: true),
        // Kept when a later payload does not say it, and not compared: Apple's latest
        // transaction may leave it out, and that unsays nothing.
        .text("previous_original_transaction_id", \.previousOriginalTransactionId, update: .keepWhenAbsent),
    ]

    package static let blank = SubscriptionRecord(
        originalTransactionId: "", productId: nil, status: nil, expiresDate: nil, autoRenewStatus: nil, autoRenewProductId: nil,
        isInBillingRetry: nil, gracePeriodExpiresDate: nil, lastSignedDate: Date(timeIntervalSince1970: 0)
    )
}
