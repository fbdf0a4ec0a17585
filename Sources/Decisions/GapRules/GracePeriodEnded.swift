import Foundation
import LedgerModel

/// Recorded in the billing grace period (status 4), but the grace period (else the period) ended
/// over an hour ago, and the account was not verified since: the renewal, the expiry or the
/// grace period's expiry was missed.
package struct GracePeriodEnded: GapRule {
    package init() {}
    package var reason: GapReason { .gracePeriodEnded }

    package func selects(_ view: CustomerLedgerView, now: Date) -> Bool {
        guard let subscription = view.subscription, subscription.status == 4,
            let end = subscription.gracePeriodExpiresDate ?? subscription.expiresDate
        else { return false }
        return GapRules.isOverdue(end, view, now: now)
    }
}
