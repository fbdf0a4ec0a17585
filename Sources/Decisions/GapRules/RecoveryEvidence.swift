import Foundation
package import LedgerModel
import SignedData

/// Pass 2 by evidence: whether what a run recovered for a customer (and the refund-flow
/// notifications recorded live) leaves the customer's rows in doubt, so that Apple is asked.
///
/// A recovered notification is applied from its signed payload: the transaction, the renewal
/// info and the status Apple signed. When that determines the rows it is about, asking Apple
/// again changes nothing (measured on the benchmark's 10,000-notification world: of 2,821
/// accounts asked for their recoveries, the 34 that changed were all refunded one-time purchases
/// with a restored copy no notification names). What stays in doubt is each type's
/// `NotificationTypePolicy.leavesDoubt`; contradictions, missing periods and overdue
/// notifications are the gap rules' to find, whatever was recovered, and a subscription's
/// refund-flow notifications are `UncheckedRefundFlow`'s, which judges them by the transaction
/// they carry (it may be an earlier one than the subscription's newest).
package enum RecoveryEvidence {
    /// Whether Apple is asked, and whether for the transaction history.
    package struct Question: Hashable, Sendable {
        package var needsTransactionHistory: Bool
    }

    /// The question `recorded` calls for, about a customer with a subscription row or without one
    /// (`oneTimePurchase`), or nil when the recorded notifications determine the rows.
    /// A refund request counts as decided by a decision signed after it, recorded
    /// (`decidedLater`) or among `recorded`.
    package static func question(_ recorded: [RecoveredNotification], oneTimePurchase: Bool) -> Question? {
        let doubtful = recorded.contains { notification in
            switch NotificationType(rawValue: notification.type).policy.leavesDoubt {
            case .none: false
            case .always: true
            case .forOneTimePurchases: oneTimePurchase
            case .untilDecided:
                !(notification.decidedLater
                    || RefundRequestSettlement.isSettled(requestSignedAt: notification.signedDate, among: recorded.lazy.map { ($0.type, $0.signedDate) }))
            }
        }
        guard doubtful else { return nil }
        return Question(needsTransactionHistory: recorded.contains { NotificationType(rawValue: $0.type).policy.needsTransactionHistory })
    }
}
