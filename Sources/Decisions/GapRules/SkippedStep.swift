package import Foundation
package import LedgerModel
import SignedData

/// The notifications since the last renewal skip a step, in an expiry recorded since the last
/// verification: expired voluntarily without auto-renew turned off (nor a refund or
/// revocation), or expired for billing without a billing failure.
package struct SkippedStep: GapRule {
    package init() {}
    package var reason: GapReason { .skippedStep }

    package func selects(_ view: CustomerLedgerView, now: Date) -> Bool {
        var sinceRenewal: [(type: NotificationType, subtype: NotificationSubtype?)] = []
        for notification in view.notifications.sorted(by: { $0.signedDate < $1.signedDate }) {
            let type = NotificationType(rawValue: notification.type)
            let subtype = notification.subtype.map(NotificationSubtype.init(rawValue:))
            if type == .subscribed || type == .didRenew {
                sinceRenewal = []
                continue
            }
            if type == .expired, GapRules.isNews(notification.recordedAt, since: view.verifiedAt) {
                if subtype == .voluntary
                    && !sinceRenewal.contains(where: { $0.type == .didChangeRenewalStatus && $0.subtype == .autoRenewDisabled })
                    && !sinceRenewal.contains(where: { $0.type == .refund || $0.type == .revoke })
                {
                    return true
                }
                if subtype == .billingRetry && !sinceRenewal.contains(where: { $0.type == .didFailToRenew }) {
                    return true
                }
            }
            sinceRenewal.append((type, subtype))
        }
        return false
    }
}
