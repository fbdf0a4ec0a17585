package import Foundation

/// A row of `app_store.transactions`: the newest signed version of a transaction.
package struct TransactionRecord: Hashable, Sendable, LedgerRow {
    package var transactionId: String
    package var originalTransactionId: String
    package var productId: String?
    package var productType: String?
    package var purchaseDate: Date?
    package var expiresDate: Date?
    package var revocationDate: Date?
    package var revocationReason: Int?
    package var isUpgraded: Bool?
    package var signedDate: Date
    package var environment: String?
    /// The app's bundle ID (migration 0020).
    package var bundleId: String?
    package var signedTransaction: String
    // What a backend queries (migration 0006); not in the initializer, set where they are known.
    /// The app's own UUID for the customer, when the app set one at purchase.
    package var appAccountToken: UUID? = nil
    /// `PURCHASED` or `FAMILY_SHARED`.
    package var inAppOwnershipType: String? = nil
    package var subscriptionGroupIdentifier: String? = nil
    package var webOrderLineItemId: String? = nil
    package var quantity: Int? = nil
    /// Milliunits of `currency` (Apple: not for revenue reconciliation).
    package var price: Int64? = nil
    package var currency: String? = nil
    package var storefront: String? = nil
    /// Apple's 1 introductory, 2 promotional, 3 offer code, 4 win-back.
    package var offerType: Int? = nil
    package var offerIdentifier: String? = nil
    /// `PURCHASE` or `RENEWAL`.
    package var transactionReason: String? = nil
    /// `REFUND_FULL`, `REFUND_PRORATED` or `FAMILY_REVOKE`.
    package var revocationType: String? = nil
    /// Milliunits of a percent refunded (0–100000).
    package var revocationPercentage: Int? = nil
    package var appTransactionId: String? = nil
    // Migration 0023.
    /// When the purchase of the original transaction was made.
    package var originalPurchaseDate: Date? = nil
    /// The offer's payment mode: `FREE_TRIAL`, `PAY_AS_YOU_GO`, `PAY_UP_FRONT` or `ONE_TIME`.
    package var offerDiscountType: String? = nil
    /// How long the offer lasts, in ISO 8601 (`P1M`).
    package var offerPeriod: String? = nil
    /// Apple's ID of the storefront (`143441`), beside `storefront`'s three letters.
    package var storefrontId: String? = nil
    /// The originalTransactionId this purchase had before Apple migrated it.
    package var previousOriginalTransactionId: String? = nil

    package init(
        transactionId: String, originalTransactionId: String, productId: String?, productType: String?, purchaseDate: Date?,
        expiresDate: Date?, revocationDate: Date?, revocationReason: Int?, isUpgraded: Bool?, signedDate: Date,
        environment: String?, bundleId: String?, signedTransaction: String
    ) {
        self.bundleId = bundleId
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.productType = productType
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.revocationDate = revocationDate
        self.revocationReason = revocationReason
        self.isUpgraded = isUpgraded
        self.signedDate = signedDate
        self.environment = environment
        self.signedTransaction = signedTransaction
    }
}


extension TransactionRecord {
    /// `app_store.transactions`' columns (`signed_transaction` aside, and the database's
    /// `recorded_at` and `updated_at`). Compared: what a repair checks against Apple's answer, every
    /// column Apple's payload sets but the signing time (Set App Account Token, for one, changes a
    /// token without any notification: only a comparison of every column sees it).
    package static let columns: [LedgerColumn<Self>] = [
        .text("transaction_id", \.transactionId, update: .key),
        .text("original_transaction_id", \.originalTransactionId, compared: true),
        .text("product_id", \.productId, compared: true),
        .text("product_type", \.productType, compared: true),
        .time("purchase_date", \.purchaseDate, compared: true),
        .time("expires_date", \.expiresDate, compared: true),
        .time("revocation_date", \.revocationDate, compared: true),
        .integer("revocation_reason", .integer, \.revocationReason, compared: true),
        .boolean("is_upgraded", \.isUpgraded, compared: true),
        .time("signed_date", \.signedDate),
        .text("environment", \.environment, update: .key, compared: true),
        .text("bundle_id", \.bundleId, update: .key),
        .uuid("app_account_token", \.appAccountToken, compared: true),
        .text("in_app_ownership_type", \.inAppOwnershipType, compared: true),
        .text("subscription_group_identifier", \.subscriptionGroupIdentifier, compared: true),
        .text("web_order_line_item_id", \.webOrderLineItemId, compared: true),
        .integer("quantity", .integer, \.quantity, compared: true),
        .integer("price", .bigint, \.price, compared: true),
        .text("currency", \.currency, compared: true),
        .text("storefront", \.storefront, compared: true),
        .integer("offer_type", .smallint, \.offerType, compared: true),
        .text("offer_identifier", \.offerIdentifier, compared: true),
        .text("transaction_reason", \.transactionReason, compared: true),
        .text("revocation_type", \.revocationType, compared: true),
        .integer("revocation_percentage", .integer, \.revocationPercentage, compared: true),
        .text("app_transaction_id", \.appTransactionId, compared: true),
        .time("original_purchase_date", \.originalPurchaseDate, compared: true),
        .text("offer_discount_type", \.offerDiscountType, compared: true),
        .text("offer_period", \.offerPeriod, compared: true),
        .text("storefront_id", \.storefrontId, compared: true),
        .text("previous_original_transaction_id", \.previousOriginalTransactionId, compared: true),
    ]

    package static let blank = TransactionRecord(
        transactionId: "", originalTransactionId: "", productId: nil, productType: nil, purchaseDate: nil, expiresDate: nil,
        revocationDate: nil, revocationReason: nil, isUpgraded: nil, signedDate: Date(timeIntervalSince1970: 0), environment: nil,
        bundleId: nil, signedTransaction: ""
    )
}
