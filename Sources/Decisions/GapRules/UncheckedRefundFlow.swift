import Foundation
import LedgerModel

/// A refund-flow notification (`NotificationTypePolicy.refundFlow`), recorded live or recovered,
/// since the account's transaction history was last compared with Apple's: it is about the
/// transaction refunded, perhaps a plan the customer upgraded from, so Apple is asked for the
/// current one.
package struct UncheckedRefundFlow: GapRule {
    package init() {}
    package var reason: GapReason { .refundFlow }

    static let types = Set(NotificationTypePolicy.names(\.refundFlow))

    package func selects(_ view: CustomerLedgerView, now: Date) -> Bool {
        view.notifications.contains { Self.types.contains($0.type) && GapRules.isNews($0.recordedAt, since: view.transactionsVerifiedAt) }
    }
}
