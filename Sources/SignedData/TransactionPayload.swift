/// A decoded signed transaction (Apple's `JWSTransactionDecodedPayload`). All dates are UNIX
/// milliseconds; identifiers are strings. Every field is optional because Apple adds and
/// omits fields by product type; the verifier checks the ones that identity depends on.
public struct TransactionPayload: Hashable, Sendable, Codable {
    public var transactionId: String?
    /// The customer's purchase key: stays the same across renewals.
    public var originalTransactionId: String?
    public var webOrderLineItemId: String?
    public var bundleId: String?
    public var productId: String?
    public var subscriptionGroupIdentifier: String?
    public var purchaseDate: UnixMilliseconds?
    public var originalPurchaseDate: UnixMilliseconds?
    public var expiresDate: UnixMilliseconds?
    public var quantity: Int?
    public var type: ProductType?
    public var appAccountToken: String?
    public var inAppOwnershipType: String?
    public var signedDate: UnixMilliseconds?
    public var revocationReason: Int?
    public var revocationDate: UnixMilliseconds?
    public var revocationType: String?
    public var revocationPercentage: Int?
    public var isUpgraded: Bool?
    public var offerType: Int?
    public var offerIdentifier: String?
    public var offerDiscountType: String?
    public var offerPeriod: String?
    public var environment: AppStoreEnvironment?
    public var storefront: String?
    public var storefrontId: String?
    public var transactionReason: String?
    /// Milliunits of `currency`. Apple: not for revenue reconciliation.
    public var price: Int64?
    public var currency: String?
    public var appTransactionId: String?
    public var previousOriginalTransactionId: String?
    public var advancedCommerceInfo: JSONValue?
    public var billingPlanType: String?
    public var commitmentInfo: JSONValue?

    public init(transactionId: String? = nil, originalTransactionId: String? = nil) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
    }
}

/// A transaction's product `type`.
public struct ProductType: ExtensibleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let autoRenewable: Self = "Auto-Renewable Subscription"
    public static let nonConsumable: Self = "Non-Consumable"
    public static let consumable: Self = "Consumable"
    public static let nonRenewing: Self = "Non-Renewing Subscription"
}
