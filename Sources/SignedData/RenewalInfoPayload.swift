/// A decoded signed renewal info (Apple's `JWSRenewalInfoDecodedPayload`): the subscription's
/// renewal state. It has no `bundleId`, so only its environment can be checked.
public struct RenewalInfoPayload: Hashable, Sendable, Codable {
    public var originalTransactionId: String?
    public var productId: String?
    public var autoRenewProductId: String?
    /// 0 off, 1 on.
    public var autoRenewStatus: Int?
    public var expirationIntent: Int?
    public var gracePeriodExpiresDate: UnixMilliseconds?
    public var isInBillingRetryPeriod: Bool?
    public var priceIncreaseStatus: Int?
    public var recentSubscriptionStartDate: UnixMilliseconds?
    public var renewalDate: UnixMilliseconds?
    public var renewalPrice: Int64?
    public var currency: String?
    public var offerType: Int?
    public var offerIdentifier: String?
    public var offerDiscountType: String?
    public var offerPeriod: String?
    public var eligibleWinBackOfferIds: [String]?
    public var appAccountToken: String?
    public var appTransactionId: String?
    public var environment: AppStoreEnvironment?
    public var signedDate: UnixMilliseconds?
    public var advancedCommerceInfo: JSONValue?
    public var commitmentInfo: JSONValue?
    public var renewalBillingPlanType: String?

    public init(originalTransactionId: String? = nil) {
        self.originalTransactionId = originalTransactionId
    }
}
