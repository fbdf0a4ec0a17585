import Foundation
import LedgerModel

/// A refund-flow notification (`NotificationTypePolicy.refundFlow`), recorded live or recovered,
/// since the account's transaction history was last compared with Apple's, that leaves the
/// account in doubt (`RecoveryEvidence`): a refund request no decision signed after it answers
/// yet (the decision may be the lost notification), or a refund of a one-time purchase. A
/// subscription's refund, reversal or declined request carries the transaction it is about,
/// applied as Apple signed it (an upgraded-from plan's, too: `isUpgraded`), and asks nothing.
package struct UncheckedRefundFlow: GapRule {
    package init() {}
    package var reason: GapReason { .refundFlow }

    package func selects(_ view: CustomerLedgerView, now: Date) -> Bool {
        RecoveryEvidence.refundFlowInDoubt(view)
    }
}
