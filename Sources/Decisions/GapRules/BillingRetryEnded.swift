import Foundation
import LedgerModel

/// Recorded in billing retry (status 3), but Apple's retrying (up to 60 days after the expiry)
/// ended over an hour ago, and the account was not verified since: the recovery or the expiry
/// was missed.
package struct BillingRetryEnded: GapRule {
    package init() {}
    package var reason: GapReason { .billingRetryEnded }

    package func selects(_ view: CustomerLedgerView, now: Date) -> Bool {
        guard let subscription = view.subscription, subscription.status == 3, let expires = subscription.expiresDate else { return false }
        return GapRules.isOverdue(expires.addingTimeInterval(GapRules.billingRetryDuration), view, now: now)
    }
}
