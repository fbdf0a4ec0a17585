import Foundation
import LedgerModel

/// The notifications since the last renewal skip a step, in an expiry recorded since the last
/// verification: expired voluntarily without auto-renew turned off (nor a refund or
/// revocation), or expired for billing without a billing failure.
package struct SkippedStep: GapRule {
    package init() {}
    package var reason: GapReason { .skippedStep }

    package func selects(_ view: CustomerLedgerView, now: Date) -> Bool {
        var sinceRenewal: [CustomerLedgerView.NotificationFacts] = []
        for notification in view.notifications.sorted(by: { $0.signedDate < $1.signedDate }) {
            if notification.type == "SUBSCRIBED" || notification.type == "DID_RENEW" {
                sinceRenewal = []
                continue
            }
            if notification.type == "EXPIRED", GapRules.isNews(notification.recordedAt, since: view.verifiedAt) {
                if notification.subtype == "VOLUNTARY"
                    && !sinceRenewal.contains(where: { $0.type == "DID_CHANGE_RENEWAL_STATUS" && $0.subtype == "AUTO_RENEW_DISABLED" })
                    && !sinceRenewal.contains(where: { $0.type == "REFUND" || $0.type == "REVOKE" })
                {
                    return true
                }
                if notification.subtype == "BILLING_RETRY" && !sinceRenewal.contains(where: { $0.type == "DID_FAIL_TO_RENEW" }) {
                    return true
                }
            }
            sinceRenewal.append(notification)
        }
        return false
    }
}
