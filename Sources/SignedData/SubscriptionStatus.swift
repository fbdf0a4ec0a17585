/// Apple's subscription status (`data.status`, `lastTransactions[].status`), as of the
/// payload's `signedDate`.
public struct SubscriptionStatus: ExtensibleIntegerValue {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    public static let active: Self = 1
    public static let expired: Self = 2
    public static let billingRetry: Self = 3
    public static let billingGracePeriod: Self = 4
    public static let revoked: Self = 5

    public var name: String {
        switch self {
        case .active: "active"
        case .expired: "expired"
        case .billingRetry: "billing retry"
        case .billingGracePeriod: "billing grace period"
        case .revoked: "revoked"
        default: "unknown (\(rawValue))"
        }
    }
}
