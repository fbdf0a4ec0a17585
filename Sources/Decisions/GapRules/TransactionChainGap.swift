package import Foundation
package import LedgerModel

/// A renewal was purchased more than a minute after the previous period had expired, with no
/// billing failure, expiry, refund or revocation signed in between: a period's notifications
/// are missing. Counts until the transaction history (not only the statuses) is checked after
/// the later transaction was recorded.
package struct TransactionChainGap: GapRule {
    package init() {}
    package var reason: GapReason { .transactionChainGap }

    /// The notification types that explain a lapse between two periods.
    static let explanations = Set(NotificationTypePolicy.names(\.explainsLapse))

    package func selects(_ view: CustomerLedgerView, now: Date) -> Bool {
        let renewals = view.transactions
            .filter { $0.productType == nil || $0.productType == "Auto-Renewable Subscription" }
            .compactMap { transaction in transaction.purchaseDate.flatMap { purchase in transaction.expiresDate.map { (transaction, purchase, $0) } } }
            .sorted { $0.1 < $1.1 }
        for (previous, next) in zip(renewals, renewals.dropFirst()) where GapRules.isNews(next.0.recordedAt, since: view.transactionsVerifiedAt) {
            let lapseStart = previous.2
            let lapseEnd = next.1
            guard lapseEnd.unixMilliseconds > lapseStart.unixMilliseconds + 60_000 else { continue }
            let explained = view.notifications.contains { notification in
                Self.explanations.contains(notification.type)
                    && notification.signedDate >= lapseStart.addingTimeInterval(-60) && notification.signedDate <= lapseEnd
            }
            if !explained { return true }
        }
        return false
    }
}
