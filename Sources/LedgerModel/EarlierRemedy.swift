package import Foundation

/// A remedy `compensate` asked Apple for earlier, as the ledger keeps it: one product's mass
/// extension, or the per-subscription extensions of one window and product.
package struct EarlierRemedy: Sendable, Hashable {
    package enum Kind: String, Sendable, Hashable {
        /// Extend Subscription Renewal Dates for All Active Subscribers (`--all-active`).
        case mass
        /// Extend a Subscription Renewal Date, for each subscriber the outage hurt.
        case perSubscription = "per_subscription"
    }

    package var kind: Kind
    package var productId: String
    /// The outage's window it was asked for (nil: kept before migration 0028, any window).
    package var windowStart: Date?
    package var windowEnd: Date?
    package var requestedAt: Date
    /// Subscribers extended (the mass extension's succeeded count once complete; the rows of the
    /// per-subscription extensions); nil: not known yet.
    package var subscribers: Int64?
    package var days: Int

    package init(kind: Kind, productId: String, windowStart: Date?, windowEnd: Date?, requestedAt: Date, subscribers: Int64?, days: Int) {
        self.kind = kind
        self.productId = productId
        self.windowStart = windowStart
        self.windowEnd = windowEnd
        self.requestedAt = requestedAt
        self.subscribers = subscribers
        self.days = days
    }
}
