package import Foundation
package import LedgerModel

/// Apple owes the subscription a notification (`SubscriptionDue`: a renewal, a failure or an
/// expiry by the expiry; a grace period's outcome by its end; billing retry's outcome 60 days after
/// the expiry), the time it was due passed more than `after` ago (`overdueAfter`, 1 hour by
/// default), and the account was not verified since then: the notification was missed, whether or
/// not anyone noticed an outage. A renewal Apple charged early was recorded with its new expiry, so
/// it is never overdue.
package struct Overdue: GapRule {
    package var after: TimeInterval

    package init(after: TimeInterval = GapRules.defaultOverdueAfter) {
        self.after = after
    }

    package var reason: GapReason { .overdue }

    package func selects(_ view: CustomerLedgerView, now: Date) -> Bool {
        guard let subscription = view.subscription, let due = SubscriptionDue.of(subscription) else { return false }
        return GapRules.isOverdue(due.dueAt, view, now: now, after: after)
    }
}
