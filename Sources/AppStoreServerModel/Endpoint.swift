/// The App Store Server API endpoints this tool calls, each with Apple's documented rate limit.
/// Limits apply per app and per endpoint; sandbox limits are 10% of production's.
public enum Endpoint: String, Hashable, Sendable, CaseIterable, Codable {
    case notificationHistory
    case transactionHistory
    case subscriptionStatuses
    case requestTestNotification
    case testNotificationStatus
    case sendConsumptionInformation
    case lookUpOrderId
    case extendRenewalDate
    case massExtendRenewalDate
    case massExtensionStatus

    public var name: String {
        switch self {
        case .notificationHistory: "Get Notification History"
        case .transactionHistory: "Get Transaction History"
        case .subscriptionStatuses: "Get All Subscription Statuses"
        case .requestTestNotification: "Request a Test Notification"
        case .testNotificationStatus: "Get Test Notification Status"
        case .sendConsumptionInformation: "Send Consumption Information"
        case .lookUpOrderId: "Look Up Order ID"
        case .extendRenewalDate: "Extend a Subscription Renewal Date"
        case .massExtendRenewalDate: "Extend Subscription Renewal Dates for All Active Subscribers"
        case .massExtensionStatus: "Get Status of Subscription Renewal Date Extensions"
        }
    }

    /// Requests per second Apple allows in Production.
    public var productionRequestsPerSecond: Double {
        switch self {
        case .notificationHistory, .transactionHistory, .subscriptionStatuses, .sendConsumptionInformation: 50
        case .extendRenewalDate: 20
        case .lookUpOrderId: 10
        // Apple lists no limit for the mass extension's status (endpoints-that-change §8.4): the
        // mass extension's own 1/s is taken.
        case .requestTestNotification, .testNotificationStatus, .massExtendRenewalDate, .massExtensionStatus: 1
        }
    }

    /// What sending a request twice does at Apple, and so when the client may send it again.
    public var repeatRule: RepeatRule {
        switch self {
        case .notificationHistory, .transactionHistory, .subscriptionStatuses, .testNotificationStatus, .lookUpOrderId, .massExtensionStatus: .reads
        // The body's requestIdentifier: Apple extends once per identifier.
        case .extendRenewalDate, .massExtendRenewalDate: .sameRequestIdentifier
        // Each request makes Apple send one more test notification.
        case .requestTestNotification: .onlyIfNotApplied
        // Apple documents no identifier that makes a second answer harmless, nor what it does
        // with one (endpoints-that-change §8.2): within a check, an answer is sent again only
        // when Apple's answer proves it was not taken. (Apple itself asks again with a new
        // CONSUMPTION_REQUEST while a request is open, and a later check answers that one.)
        case .sendConsumptionInformation: .onlyIfNotApplied
        }
    }
}
