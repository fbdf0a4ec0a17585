/// Look Up Order ID's answer (`OrderLookupResponse`): whether the order ID, from the customer's
/// emailed receipt or App Store purchase history, is one of this app's orders, and its purchases.
public struct OrderLookupResponse: Hashable, Sendable, Codable {
    /// Apple's `OrderLookupStatus`: 0 valid, 1 invalid (not an order of this app, or none).
    public var status: Int
    /// The order's purchases, one JWS each (an order may hold several); absent when invalid.
    public var signedTransactions: [String]?

    public init(status: Int, signedTransactions: [String]?) {
        self.status = status
        self.signedTransactions = signedTransactions
    }

    public var isValid: Bool { status == 0 }
}
