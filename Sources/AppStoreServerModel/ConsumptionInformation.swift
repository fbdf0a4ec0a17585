public import SignedData

/// The body of Send Consumption Information, version 2 (`ConsumptionRequest`,
/// `PUT /inApps/v2/transactions/consumption/{transactionId}`): the customer's consent, whether
/// the purchase was delivered, whether a sample or a description was offered first, and
/// optionally how much was consumed and what the team would prefer. Optional fields that are nil
/// are omitted. Apple answers 202; see `ConsumptionAnswerRules` (RemedyDecisions) for what it refuses.
public struct ConsumptionInformation: Hashable, Sendable, Codable {
    /// Must be true: Apple refuses false (InvalidCustomerConsentedError, 4000035).
    public var customerConsented: Bool
    public var deliveryStatus: DeliveryStatus
    public var sampleContentProvided: Bool
    /// Milliunits, 0…100000 (40% = 40000); not for an auto-renewable subscription; 0 for an
    /// undelivered purchase.
    public var consumptionPercentage: Int32?
    public var refundPreference: RefundPreference?

    public init(
        customerConsented: Bool, deliveryStatus: DeliveryStatus, sampleContentProvided: Bool, consumptionPercentage: Int32? = nil,
        refundPreference: RefundPreference? = nil
    ) {
        self.customerConsented = customerConsented
        self.deliveryStatus = deliveryStatus
        self.sampleContentProvided = sampleContentProvided
        self.consumptionPercentage = consumptionPercentage
        self.refundPreference = refundPreference
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(customerConsented, forKey: .customerConsented)
        try container.encode(deliveryStatus, forKey: .deliveryStatus)
        try container.encode(sampleContentProvided, forKey: .sampleContentProvided)
        if let consumptionPercentage { try container.encode(consumptionPercentage, forKey: .consumptionPercentage) }
        if let refundPreference { try container.encode(refundPreference, forKey: .refundPreference) }
    }
}

/// `deliveryStatus`: whether the app delivered the purchase and worked, and if not, why. An
/// extensible value: a string Apple does not document decodes, and validation names it.
public struct DeliveryStatus: ExtensibleStringValue {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let delivered: Self = "DELIVERED"
    public static let undeliveredQualityIssue: Self = "UNDELIVERED_QUALITY_ISSUE"
    public static let undeliveredWrongItem: Self = "UNDELIVERED_WRONG_ITEM"
    public static let undeliveredServerOutage: Self = "UNDELIVERED_SERVER_OUTAGE"
    public static let undeliveredOther: Self = "UNDELIVERED_OTHER"
    /// The five values Apple documents.
    public static let documented: [Self] = [.delivered, .undeliveredQualityIssue, .undeliveredWrongItem, .undeliveredServerOutage, .undeliveredOther]
}

/// `refundPreference`: what the team would prefer Apple did with the request.
public struct RefundPreference: ExtensibleStringValue {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let decline: Self = "DECLINE"
    public static let grantFull: Self = "GRANT_FULL"
    public static let grantProrated: Self = "GRANT_PRORATED"
    /// The three values Apple documents.
    public static let documented: [Self] = [.decline, .grantFull, .grantProrated]
}
