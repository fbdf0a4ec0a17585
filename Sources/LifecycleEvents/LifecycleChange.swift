package import Foundation
package import LedgerModel

/// One change of one subscription as a ledger writer makes it: its row before and after, the
/// transactions the change wrote (each with its row before; nil when new), and the period the
/// subscription had before the new ones. `events` is a pure function of it: the same change gives
/// the same events whoever wrote it.
package struct LifecycleChange: Sendable {
    package struct TransactionChange: Sendable {
        package var before: TransactionRecord?
        package var after: TransactionRecord

        package init(before: TransactionRecord?, after: TransactionRecord) {
            self.before = before
            self.after = after
        }
    }

    package var before: SubscriptionRecord?
    package var after: SubscriptionRecord?
    package var transactions: [TransactionChange]
    /// The subscription's latest period (by start) before the change's new ones: what the first
    /// new period follows. Nil when the subscription had none.
    package var previous: TransactionRecord?
    package var cause: LifecycleCause
    /// When the change was made: the entitlement is judged then.
    package var at: Date
    package var levels: ProductLevels

    package init(
        before: SubscriptionRecord?, after: SubscriptionRecord?, transactions: [TransactionChange] = [], previous: TransactionRecord? = nil,
        cause: LifecycleCause, at: Date, levels: ProductLevels = ProductLevels()
    ) {
        self.before = before
        self.after = after
        self.transactions = transactions
        self.previous = previous
        self.cause = cause
        self.at = at
        self.levels = levels
    }

    static let autoRenewable = "Auto-Renewable Subscription"

    /// Whether a subscription row grants access at `at`: active and not expired, or in the billing
    /// grace period before it ends (the rule of the app_store.entitlements view). Apple's statuses
    /// (App Store Server API, "status": 1 active, 2 expired, 3 billing retry, 4 billing grace period,
    /// 5 revoked) and "Reducing involuntary subscriber churn" (developer.apple.com/documentation/
    /// storekit/reducing-involuntary-subscriber-churn): a subscriber in grace keeps access, one in
    /// billing retry after it does not.
    package static func entitled(_ subscription: SubscriptionRecord?, at: Date) -> Bool {
        guard let subscription else { return false }
        switch subscription.status {
        case 1?: return subscription.expiresDate.map { $0 > at } ?? true
        case 4?: return subscription.gracePeriodExpiresDate.map { $0 > at } ?? true
        default: return false
        }
    }

    static func isTrial(_ transaction: TransactionRecord) -> Bool {
        transaction.offerDiscountType == "FREE_TRIAL"
    }

    /// The change's events: its new periods in the order they started, then what happened to
    /// existing transactions (refunds, reversals, extensions), then to the subscription (billing,
    /// expiry, the next renewal's plan, auto-renew). A change that alters no fact an event names
    /// (Apple re-signing the same values) gives none.
    package var events: [LifecycleEvent] {
        let subscription = after ?? before
        let entitled = Self.entitled(after, at: at)
        func event(_ type: LifecycleEventType, _ transaction: TransactionRecord? = nil, reason: ExpiryReason? = nil, at effective: Date? = nil) -> LifecycleEvent {
            LifecycleEvent(
                type: type, bundleId: subscription?.bundleId ?? transaction?.bundleId, environment: subscription?.environment ?? transaction?.environment,
                originalTransactionId: subscription?.originalTransactionId ?? transaction?.originalTransactionId ?? "", transactionId: transaction?.transactionId,
                productId: transaction?.productId ?? subscription?.productId, appAccountToken: subscription?.appAccountToken ?? transaction?.appAccountToken,
                entitled: entitled, cause: cause, reason: reason, effectiveAt: effective
            )
        }
        var found: [LifecycleEvent] = []
        let periods = transactions.filter { $0.after.productType == Self.autoRenewable }
        // New periods.
        var last = previous
        let new = periods.filter { $0.before == nil }.map(\.after)
            .sorted { ($0.purchaseDate ?? .distantPast, $0.transactionId) < ($1.purchaseDate ?? .distantPast, $1.transactionId) }
        for period in new {
            defer { last = period }
            if Self.isTrial(period) {
                found.append(event(.trialStarted, period, at: period.purchaseDate))
            } else if let last, Self.isTrial(last) {
                found.append(event(.trialConverted, period, at: period.purchaseDate))
            } else if let last, let change = Self.planChangeAtOnce(from: last, to: period, levels: levels) {
                found.append(event(change, period, at: period.purchaseDate))
            } else if last != nil, period.transactionReason == "RENEWAL" {
                found.append(event(.renewed, period, at: period.purchaseDate))
            } else {
                found.append(event(.subscriptionStarted, period, at: period.purchaseDate))
            }
        }
        // Revocations, their reversals, extensions.
        for change in periods {
            let now = RevocationKind(change.after)
            let then = change.before.flatMap { RevocationKind($0) }
            if let now, then == nil, now != .upgraded {
                found.append(event(now.isRefund ? .refunded : .revoked, change.after, at: change.after.revocationDate))
            } else if now == nil, let then, then != .upgraded {
                found.append(event(.refundReversed, change.after))
            }
            if let before = change.before?.expiresDate, let expires = change.after.expiresDate, expires > before, now == nil {
                found.append(event(.extended, change.after, at: expires))
            }
        }
        found += subscriptionEvents(event)
        return found
    }

    /// A new paid period of another product that starts before the previous period expired: a
    /// plan change Apple made at once. Apple makes an upgrade, or a crossgrade to a plan of the
    /// same duration, at once (DID_CHANGE_RENEWAL_PREF, subtype UPGRADE): `upgraded`, or
    /// `crossgraded` when the levels say the plans are of one level. Sources: App Store Server
    /// Notifications, "subtype" (developer.apple.com/documentation/appstoreservernotifications/subtype:
    /// UPGRADE takes effect immediately, DOWNGRADE at the next renewal); App Store Connect Help,
    /// "Offer auto-renewable subscriptions" (levels: an upgrade begins at once, a downgrade and a
    /// crossgrade of another duration at the next renewal); an Apple engineer's answer on the
    /// Developer Forums, thread 729677 (the subtypes tell upgrade, downgrade and crossgrade apart).
    static func planChangeAtOnce(from last: TransactionRecord, to period: TransactionRecord, levels: ProductLevels) -> LifecycleEventType? {
        guard let from = last.productId, let to = period.productId, from != to, let expires = last.expiresDate, let starts = period.purchaseDate,
            starts < expires, last.revocationDate == nil || last.isUpgraded == true
        else { return nil }
        return levels.compare(from: from, to: to) == .same ? .crossgraded : .upgraded
    }

    /// What the subscription row's change says: billing trouble and its end, expiry, the next
    /// renewal's plan, auto-renew. Nothing for a row the change created (its history is unknown).
    func subscriptionEvents(_ event: (LifecycleEventType, TransactionRecord?, ExpiryReason?, Date?) -> LifecycleEvent) -> [LifecycleEvent] {
        guard let before, let after else { return [] }
        var found: [LifecycleEvent] = []
        switch (before.status, after.status) {
        case (1?, 3?): found.append(event(.renewalFailed, nil, nil, before.expiresDate))
        case (1?, 4?): found += [event(.renewalFailed, nil, nil, before.expiresDate), event(.gracePeriodStarted, nil, nil, before.expiresDate)]
        case (3?, 4?): found.append(event(.gracePeriodStarted, nil, nil, nil))
        default: break
        }
        if before.status == 4, after.status != 4 { found.append(event(.gracePeriodEnded, nil, nil, before.gracePeriodExpiresDate)) }
        if [3, 4].contains(before.status), after.status == 1 { found.append(event(.billingRecovered, nil, nil, nil)) }
        if after.status == 2, before.status != 2 {
            found.append(event(.expired, nil, ExpiryReason(expirationIntent: after.expirationIntent), after.expiresDate))
        }
        // The next renewal's plan: Apple makes a downgrade, or a crossgrade to a plan of another
        // duration, at the next renewal (DID_CHANGE_RENEWAL_PREF, subtype DOWNGRADE).
        if let next = after.autoRenewProductId, let current = after.productId, next != current, next != before.autoRenewProductId {
            switch levels.compare(from: current, to: next) {
            case .same?, .higher?: found.append(event(.crossgraded, nil, nil, after.expiresDate))
            case .lower?, nil: found.append(event(.downgraded, nil, nil, after.expiresDate))
            }
        }
        switch (before.autoRenewStatus, after.autoRenewStatus) {
        case (1?, 0?): found.append(event(.autoRenewDisabled, nil, nil, nil))
        case (0?, 1?): found.append(event(.autoRenewEnabled, nil, nil, nil))
        default: break
        }
        return found
    }
}

/// The levels of a subscription group's plans as App Store Connect ranks them (1 the highest):
/// what tells a downgrade from a crossgrade. Products it does not name compare as unknown.
package struct ProductLevels: Sendable, Equatable {
    package enum Comparison: Sendable, Equatable { case higher, same, lower }
    package var levels: [String: Int]

    package init(_ levels: [String: Int] = [:]) {
        self.levels = levels
    }

    /// Whether `to` is of a higher, the same or a lower level than `from`; nil when either is unknown.
    package func compare(from: String, to: String) -> Comparison? {
        guard let old = levels[from], let new = levels[to] else { return nil }
        return new < old ? .higher : new == old ? .same : .lower
    }
}
