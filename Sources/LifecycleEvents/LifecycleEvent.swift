package import Foundation

/// What happened to a subscription, as a team's other services want to hear it (issue 66): derived
/// from the ledger's rows before and after a change, so that every writer (`serve`, a recovery, a
/// repair, an import) gives the same events for the same change. The raw values are a contract
/// (the outbox's `type`, docs/streams.md).
package enum LifecycleEventType: String, Sendable, Hashable, CaseIterable, Codable {
    /// A subscription's first period, a paid one (or a purchase after it lapsed).
    case subscriptionStarted = "subscription_started"
    case trialStarted = "trial_started"
    /// A paid period right after a free trial of the same subscription.
    case trialConverted = "trial_converted"
    case renewed
    /// Apple could not charge the renewal: billing retry, or the grace period.
    case renewalFailed = "renewal_failed"
    case gracePeriodStarted = "grace_period_started"
    case gracePeriodEnded = "grace_period_ended"
    /// Billing retry or grace ended with a successful charge.
    case billingRecovered = "billing_recovered"
    /// The subscription expired; `reason` says why, as Apple's expirationIntent gives it.
    case expired
    case refunded
    /// Apple reversed a refund or revocation (the transaction's revocation is gone).
    case refundReversed = "refund_reversed"
    /// Access withdrawn without a refund: Family Sharing, or a revocation type this release does not know.
    case revoked
    /// Apple marked the plan upgraded from (`isUpgraded`): the higher plan took effect at once.
    case upgraded
    /// The customer chose, for the next renewal, a plan of a lower level (ProductLevels).
    case downgraded
    /// The customer chose, for the next renewal, a plan of the same level or of a level unknown.
    case crossgraded
    case autoRenewDisabled = "auto_renew_disabled"
    case autoRenewEnabled = "auto_renew_enabled"
    /// Apple moved the period's expiry later (a renewal date extension).
    case extended
}

/// Who wrote the change an event comes from.
package enum LifecycleCause: String, Sendable, Hashable, CaseIterable, Codable {
    /// A live notification (`serve`, `ingest`).
    case webhook
    /// A missed notification recovered from Get Notification History.
    case recovery
    /// A repair from Apple's account answers (pass 2, `repair`, `customer --repair`).
    case repair
    /// `import` of an earlier backend's customers.
    case `import`
}

extension LifecycleCause {
    /// The change feed's `cause` (app_store.changes): a recovery's pages are `history`.
    package init(changeFeedCause cause: String) {
        switch cause {
        case "history": self = .recovery
        case "repair": self = .repair
        case "import": self = .import
        default: self = .webhook
        }
    }
}

/// Why an `expired` subscription expired: Apple's `expirationIntent` (1 to 5) by name.
package enum ExpiryReason: String, Sendable, Hashable, Codable {
    case voluntary, billingError = "billing_error", priceIncrease = "price_increase", productNotForSale = "product_not_for_sale", other

    package init(expirationIntent: Int?) {
        switch expirationIntent {
        case 1?: self = .voluntary
        case 2?: self = .billingError
        case 3?: self = .priceIncrease
        case 4?: self = .productNotForSale
        default: self = .other
        }
    }
}

/// One event: the subscription it concerns, and what a consumer needs without a lookup.
package struct LifecycleEvent: Sendable, Hashable, Codable {
    package var type: LifecycleEventType
    package var bundleId: String?
    package var environment: String?
    package var originalTransactionId: String
    /// The transaction the event comes from, when one does (a new period, a refund, an upgrade).
    package var transactionId: String?
    package var productId: String?
    package var appAccountToken: UUID?
    /// Whether the subscription grants access after the change (the rule of app_store.entitlements).
    package var entitled: Bool
    package var cause: LifecycleCause
    /// `expired` only.
    package var reason: ExpiryReason?
    /// When it took effect as Apple signed it (a period's start, a refund's date, an expiry), when known.
    package var effectiveAt: Date?

    package init(
        type: LifecycleEventType, bundleId: String?, environment: String?, originalTransactionId: String, transactionId: String? = nil,
        productId: String?, appAccountToken: UUID?, entitled: Bool, cause: LifecycleCause, reason: ExpiryReason? = nil, effectiveAt: Date? = nil
    ) {
        self.type = type
        self.bundleId = bundleId
        self.environment = environment
        self.originalTransactionId = originalTransactionId
        self.transactionId = transactionId
        self.productId = productId
        self.appAccountToken = appAccountToken
        self.entitled = entitled
        self.cause = cause
        self.reason = reason
        self.effectiveAt = effectiveAt
    }
}

extension LifecycleEvent {
    /// The outbox row's payload (docs/streams.md, a contract): the fields in snake case, the
    /// account token in lower case, times ISO 8601 in UTC with milliseconds, absent values left out.
    package func payloadJSON() throws -> String {
        var object: [String: Any] = ["type": type.rawValue, "original_transaction_id": originalTransactionId, "entitled": entitled, "cause": cause.rawValue]
        object["bundle_id"] = bundleId
        object["environment"] = environment
        object["transaction_id"] = transactionId
        object["product_id"] = productId
        object["app_account_token"] = appAccountToken?.uuidString.lowercased()
        object["reason"] = reason?.rawValue
        object["effective_at"] = effectiveAt?.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        return String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }
}
