import Foundation
import LedgerModel

/// Recorded active (status 1), but the period, and the grace period if any, ended over an hour
/// ago, and the account was not verified since: the renewal or the expiry was missed.
package struct ActiveButExpired: GapRule {
    package init() {}
    package var reason: GapReason { .activeButExpired }

    package func selects(_ view: CustomerLedgerView, now: Date) -> Bool {
        guard let subscription = view.subscription, subscription.status == 1, let expires = subscription.expiresDate else { return false }
        return GapRules.isOverdue(max(expires, subscription.gracePeriodExpiresDate ?? expires), view, now: now)
    }
}
