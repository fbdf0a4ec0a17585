public import SignedData

/// Query parameters of Get Transaction History v2. Multi-valued filters are sent as repeated
/// parameters. A continuation (`revision`) must repeat the same parameters.
public struct TransactionHistoryQuery: Hashable, Sendable {
    public enum Sort: String, Sendable, Hashable {
        case ascending = "ASCENDING"
        case descending = "DESCENDING"
    }

    public var sort: Sort
    public var startDate: UnixMilliseconds?
    public var endDate: UnixMilliseconds?
    public var productIds: [String]
    public var productTypes: [String]
    public var subscriptionGroupIdentifiers: [String]
    public var inAppOwnershipType: String?
    public var revoked: Bool?

    /// Ascending by modification date: the only order whose final revision may be stored and
    /// resumed from.
    public init(
        sort: Sort = .ascending, startDate: UnixMilliseconds? = nil, endDate: UnixMilliseconds? = nil, productIds: [String] = [],
        productTypes: [String] = [], subscriptionGroupIdentifiers: [String] = [], inAppOwnershipType: String? = nil,
        revoked: Bool? = nil
    ) {
        self.sort = sort
        self.startDate = startDate
        self.endDate = endDate
        self.productIds = productIds
        self.productTypes = productTypes
        self.subscriptionGroupIdentifiers = subscriptionGroupIdentifiers
        self.inAppOwnershipType = inAppOwnershipType
        self.revoked = revoked
    }

    /// The query items, in a stable order, with `revision` when continuing.
    public func queryItems(revision: String?) -> [(String, String)] {
        var items: [(String, String)] = []
        if let revision { items.append(("revision", revision)) }
        items.append(("sort", sort.rawValue))
        if let startDate { items.append(("startDate", String(startDate))) }
        if let endDate { items.append(("endDate", String(endDate))) }
        items += productIds.map { ("productId", $0) }
        items += productTypes.map { ("productType", $0) }
        items += subscriptionGroupIdentifiers.map { ("subscriptionGroupIdentifier", $0) }
        if let inAppOwnershipType { items.append(("inAppOwnershipType", inAppOwnershipType)) }
        if let revoked { items.append(("revoked", revoked ? "true" : "false")) }
        return items
    }
}

/// One page of Get Transaction History (`HistoryResponse`): at most 20 signed transactions.
public struct HistoryResponse: Hashable, Sendable, Codable {
    /// The token for the next request; after the last page (`hasMore` false), the token to
    /// store and start from next time.
    public var revision: String
    public var hasMore: Bool
    public var bundleId: String?
    public var appAppleId: Int64?
    public var environment: AppStoreEnvironment?
    public var signedTransactions: [String]

    public init(
        revision: String, hasMore: Bool, bundleId: String?, appAppleId: Int64?, environment: AppStoreEnvironment?,
        signedTransactions: [String]
    ) {
        self.revision = revision
        self.hasMore = hasMore
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environment = environment
        self.signedTransactions = signedTransactions
    }
}

/// Get All Subscription Statuses (`StatusResponse`), organized by subscription group.
public struct StatusResponse: Hashable, Sendable, Codable {
    public var environment: AppStoreEnvironment?
    public var bundleId: String?
    public var appAppleId: Int64?
    public var data: [SubscriptionGroupStatus]

    public init(environment: AppStoreEnvironment?, bundleId: String?, appAppleId: Int64?, data: [SubscriptionGroupStatus]) {
        self.environment = environment
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.data = data
    }
}

public struct SubscriptionGroupStatus: Hashable, Sendable, Codable {
    public var subscriptionGroupIdentifier: String?
    /// The latest signed transaction and renewal info of each subscription in the group.
    public var lastTransactions: [LastTransaction]

    public init(subscriptionGroupIdentifier: String?, lastTransactions: [LastTransaction]) {
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.lastTransactions = lastTransactions
    }
}

public struct LastTransaction: Hashable, Sendable, Codable {
    public var status: SubscriptionStatus?
    public var originalTransactionId: String?
    public var signedTransactionInfo: String?
    public var signedRenewalInfo: String?

    public init(status: SubscriptionStatus?, originalTransactionId: String?, signedTransactionInfo: String?, signedRenewalInfo: String?) {
        self.status = status
        self.originalTransactionId = originalTransactionId
        self.signedTransactionInfo = signedTransactionInfo
        self.signedRenewalInfo = signedRenewalInfo
    }
}

/// Request a Test Notification's answer.
public struct SendTestNotificationResponse: Hashable, Sendable, Codable {
    public var testNotificationToken: String
    public init(testNotificationToken: String) { self.testNotificationToken = testNotificationToken }
}

/// Get Test Notification Status's answer.
public struct CheckTestNotificationResponse: Hashable, Sendable, Codable {
    public var signedPayload: String?
    public var sendAttempts: [SendAttempt]?
    public init(signedPayload: String?, sendAttempts: [SendAttempt]?) {
        self.signedPayload = signedPayload
        self.sendAttempts = sendAttempts
    }
}
