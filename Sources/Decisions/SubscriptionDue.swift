package import Foundation
package import LedgerModel

/// What Apple owes a subscription next, and by when (issue 64, point 1). Every writer of
/// `app_store.subscriptions` stores it with the row (`due_at`, `expected`), which
/// `app_store.overdue_subscriptions`, `serve`'s gauge and `status` read; pass 2's `Overdue` rule
/// selects the accounts it makes overdue. From the
/// state the ledger holds: an active subscription renewing automatically must see DID_RENEW,
/// DID_FAIL_TO_RENEW or EXPIRED by its expiry; one whose auto-renew is off an EXPIRED by its
/// expiry; one in billing grace a DID_RENEW/BILLING_RECOVERY or GRACE_PERIOD_EXPIRED by the grace
/// period's end; one in billing retry a recovery or EXPIRED by the end of Apple's retrying (60
/// days after the expiry, `GapRules.billingRetryDuration`). Expired and revoked subscriptions are
/// owed nothing. A renewal Apple charged early moves the expiry when it is recorded, so the same
/// subscription is then due a period later: early renewals are never overdue.
package struct SubscriptionDue: Hashable, Sendable {
    /// What Apple must say.
    package enum Expected: String, Hashable, Sendable, CaseIterable {
        /// DID_RENEW, DID_FAIL_TO_RENEW or EXPIRED.
        case renewalOrFailure = "renewal_or_failure"
        /// EXPIRED (auto-renew off).
        case expiry
        /// DID_RENEW/BILLING_RECOVERY or GRACE_PERIOD_EXPIRED.
        case graceOutcome = "grace_outcome"
        /// DID_RENEW/BILLING_RECOVERY or EXPIRED/BILLING_RETRY.
        case retryOutcome = "retry_outcome"
    }

    package var expected: Expected
    package var dueAt: Date

    package init(expected: Expected, dueAt: Date) {
        self.expected = expected
        self.dueAt = dueAt
    }

    /// What `subscription` is owed; nil when nothing (expired, revoked, or no expiry known).
    package static func of(_ subscription: SubscriptionRecord) -> SubscriptionDue? {
        guard let expires = subscription.expiresDate else { return nil }
        switch subscription.status {
        case 1:
            // Apple's renewal info may still carry a grace period's end after a recovery: the later end holds.
            let end = max(expires, subscription.gracePeriodExpiresDate ?? expires)
            return SubscriptionDue(expected: subscription.autoRenewStatus == 0 ? .expiry : .renewalOrFailure, dueAt: end)
        case 4:
            return SubscriptionDue(expected: .graceOutcome, dueAt: subscription.gracePeriodExpiresDate ?? expires)
        case 3:
            return SubscriptionDue(expected: .retryOutcome, dueAt: expires.addingTimeInterval(GapRules.billingRetryDuration))
        default:
            return nil
        }
    }

    /// How long past its due time `subscription` is at `now`, once more than `after` has passed
    /// (`overdueAfter`, 1 hour by default); nil while nothing is overdue.
    package static func overdue(_ subscription: SubscriptionRecord, now: Date, after: TimeInterval = GapRules.defaultOverdueAfter) -> TimeInterval? {
        guard let due = of(subscription) else { return nil }
        let late = now.timeIntervalSince(due.dueAt)
        return late > after ? late : nil
    }
}
