package import Foundation
package import LedgerModel

/// The subscription's row was signed before the customer's newest transaction recorded since the
/// last verification: the notification that carried that transaction's state was missed.
package struct RowOlderThanTransactions: GapRule {
    package init() {}
    package var reason: GapReason { .rowOlderThanTransactions }

    package func selects(_ view: CustomerLedgerView, now: Date) -> Bool {
        guard let subscription = view.subscription,
            let newest = view.transactions.filter({ GapRules.isNews($0.recordedAt, since: view.verifiedAt) }).map(\.signedDate).max()
        else { return false }
        return subscription.lastSignedDate.unixMilliseconds < newest.unixMilliseconds
    }
}
