package import Foundation
package import LedgerModel
import SignedData

/// A refund-flow notification (`NotificationTypePolicy.refundFlow`), recorded live or recovered
/// since the account's transaction history was last compared with Apple's, that leaves the rows
/// in doubt: a refund request no decision signed after it settles (the decision may be the
/// notification lost), or one about a transaction that is not the newest of its subscription the
/// ledger holds, or that the ledger does not hold. Such a notification carries the transaction
/// refunded, perhaps a plan the customer upgraded from, without `isUpgraded` (the simulator marks
/// it in the transaction history only): applied, it can leave the row on the annual plan and its later
/// expiry (measured: selecting no decided refund flow left 5 of 25,188 accounts wrong in the
/// benchmark's 100,000-notification world, each on the plan it had upgraded from). About the
/// newest transaction the ledger holds, the notification's transaction, status and renewal info
/// are the rows, and Apple is not asked. Apple's word that a refund flow's transaction may be an
/// earlier one: App Store Commerce Engineering's accepted answer in developer forum thread 774755
/// ("signedTransactionInfo refers to the transaction referenced by the action, in the case of a
/// refund flow, that may not be the most recent transaction").
package struct UncheckedRefundFlow: GapRule {
    package init() {}
    package var reason: GapReason { .refundFlow }

    static let types = Set(NotificationTypePolicy.names(\.refundFlow))

    package func selects(_ view: CustomerLedgerView, now: Date) -> Bool {
        view.notifications.contains { notification in
            Self.types.contains(notification.type) && GapRules.isNews(notification.recordedAt, since: view.transactionsVerifiedAt)
                && Self.leavesDoubt(notification, in: view)
        }
    }

    static func leavesDoubt(_ notification: CustomerLedgerView.NotificationFacts, in view: CustomerLedgerView) -> Bool {
        let policy = NotificationType(rawValue: notification.type).policy
        if policy.leavesDoubt == .untilDecided,
            !RefundRequestSettlement.isSettled(requestSignedAt: notification.signedDate, among: view.notifications.lazy.map { ($0.type, $0.signedDate) })
        {
            return true
        }
        guard let id = notification.transactionId, let about = view.transactions.first(where: { $0.transactionId == id }),
            let purchased = about.purchaseDate
        else { return true }
        return about.isUpgraded == true || view.transactions.contains { ($0.purchaseDate.map { $0 > purchased }) ?? true }
    }
}
