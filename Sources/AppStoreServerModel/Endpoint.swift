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

    public var name: String {
        switch self {
        case .notificationHistory: "Get Notification History"
        case .transactionHistory: "Get Transaction History"
        case .subscriptionStatuses: "Get All Subscription Statuses"
        case .requestTestNotification: "Request a Test Notification"
        case .testNotificationStatus: "Get Test Notification Status"
        case .sendConsumptionInformation: "Send Consumption Information"
        case .lookUpOrderId: "Look Up Order ID"
        }
    }

    /// Requests per second Apple allows in Production.
    public var productionRequestsPerSecond: Double {
        switch self {
        case .notificationHistory, .transactionHistory, .subscriptionStatuses, .sendConsumptionInformation: 50
        case .lookUpOrderId: 10
        case .requestTestNotification, .testNotificationStatus: 1
        }
    }

    /// What sending a request twice does at Apple, and so when the client may send it again.
    public var repeatRule: RepeatRule {
        switch self {
        case .notificationHistory, .transactionHistory, .subscriptionStatuses, .testNotificationStatus, .lookUpOrderId: .reads
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
