/// Extend a Subscription Renewal Date (`PUT /inApps/v1/subscriptions/extend/{originalTransactionId}`)
/// and the mass extension for all active subscribers of a product
/// (`POST /inApps/v1/subscriptions/extend/mass`, its status at
/// `GET /inApps/v1/subscriptions/extend/mass/{productId}/{requestIdentifier}`): the bodies and
/// answers as Apple documents them (endpoints-that-change §3, §4).

/// Why a renewal date is extended (Apple's `extendReasonCode`).
public enum ExtendReasonCode: Int32, Hashable, Sendable, Codable, CaseIterable {
    case undeclared = 0
    case customerSatisfaction = 1
    case other = 2
    /// "Service issue or outage": what `compensate` sends.
    case serviceIssueOrOutage = 3
}

/// The body of Extend a Subscription Renewal Date (`ExtendRenewalDateRequest`): every field
/// required. `requestIdentifier` is new for each distinct extension and the same when a request
/// whose outcome is unknown is sent again.
public struct ExtendRenewalDateRequest: Hashable, Sendable, Codable {
    /// 1…90.
    public var extendByDays: Int32
    public var extendReasonCode: ExtendReasonCode
    /// At most 128 characters.
    public var requestIdentifier: String

    public init(extendByDays: Int32, extendReasonCode: ExtendReasonCode, requestIdentifier: String) {
        self.extendByDays = extendByDays
        self.extendReasonCode = extendReasonCode
        self.requestIdentifier = requestIdentifier
    }

    /// Apple's limit on `extendByDays`.
    public static let days: ClosedRange<Int32> = 1...90
}

/// Apple's answer to an extension (`ExtendRenewalDateResponse`, HTTP 200).
public struct ExtendRenewalDateResponse: Hashable, Sendable, Codable {
    public var originalTransactionId: String?
    public var webOrderLineItemId: String?
    public var success: Bool?
    /// The subscription's new expiry, UNIX milliseconds.
    public var effectiveDate: Int64?

    public init(originalTransactionId: String?, webOrderLineItemId: String?, success: Bool?, effectiveDate: Int64?) {
        self.originalTransactionId = originalTransactionId
        self.webOrderLineItemId = webOrderLineItemId
        self.success = success
        self.effectiveDate = effectiveDate
    }
}

/// The body of Extend Subscription Renewal Dates for All Active Subscribers.
public struct MassExtendRenewalDateRequest: Hashable, Sendable, Codable {
    /// A UUID (Apple refuses anything else with 4000011).
    public var requestIdentifier: String
    public var extendByDays: Int32
    public var extendReasonCode: ExtendReasonCode
    public var productId: String
    /// Three-letter storefront codes; nil: every storefront (an empty list is refused, 4000027).
    public var storefrontCountryCodes: [String]?

    public init(requestIdentifier: String, extendByDays: Int32, extendReasonCode: ExtendReasonCode, productId: String, storefrontCountryCodes: [String]? = nil) {
        self.requestIdentifier = requestIdentifier
        self.extendByDays = extendByDays
        self.extendReasonCode = extendReasonCode
        self.productId = productId
        self.storefrontCountryCodes = storefrontCountryCodes
    }
}

/// Apple took a mass extension (processed over hours or days).
public struct MassExtendRenewalDateResponse: Hashable, Sendable, Codable {
    public var requestIdentifier: String?

    public init(requestIdentifier: String?) { self.requestIdentifier = requestIdentifier }
}

/// Get Status of Subscription Renewal Date Extensions (`MassExtendRenewalDateStatusResponse`):
/// the counts only once `complete`.
public struct MassExtendRenewalDateStatusResponse: Hashable, Sendable, Codable {
    public var requestIdentifier: String?
    public var complete: Bool?
    /// UNIX milliseconds.
    public var completeDate: Int64?
    public var succeededCount: Int64?
    public var failedCount: Int64?

    public init(requestIdentifier: String?, complete: Bool?, completeDate: Int64? = nil, succeededCount: Int64? = nil, failedCount: Int64? = nil) {
        self.requestIdentifier = requestIdentifier
        self.complete = complete
        self.completeDate = completeDate
        self.succeededCount = succeededCount
        self.failedCount = failedCount
    }
}
