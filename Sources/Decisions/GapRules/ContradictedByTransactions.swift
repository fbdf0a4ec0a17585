package import Foundation
package import LedgerModel

/// The subscription's row, written by a notification signed after the account's last
/// verification, ends before the period of the same subscription the ledger recorded as bought
/// last (not refunded, revoked or upgraded from): the notification contradicts the ledger's
/// own records. Apple has been seen to sign a DID_FAIL_TO_RENEW hours after the DID_RENEW (or
/// BILLING_RECOVERY) that ended the billing trouble, carrying the failed period, while the
/// subscription stayed active (developer forum thread 745515); "the later signedDate wins" then
/// writes billing retry over a renewed subscription, and no other rule looks before Apple's
/// billing retry is over, 60 days later. A row that carries an older period than a recorded
/// transaction, whatever its status, is the same contradiction. Apple's answer (Get All
/// Subscription Statuses) settles it: signed at the request, before the verification time, it
/// never selects the account again.
package struct ContradictedByTransactions: GapRule {
    package init() {}
    package var reason: GapReason { .contradictedByTransactions }

    package func selects(_ view: CustomerLedgerView, now: Date) -> Bool {
        guard let subscription = view.subscription, let expires = subscription.expiresDate,
            GapRules.isNews(subscription.lastSignedDate, since: view.verifiedAt)
        else { return false }
        // The period bought last, not the one that ends last: a plan upgraded from (an annual plan
        // left for a monthly one) may end later than the current plan, and the ledger learns that it
        // was upgraded from (`isUpgraded`) only from the transaction history.
        let latest = view.transactions
            .filter { ($0.productType == nil || $0.productType == "Auto-Renewable Subscription") && $0.revocationDate == nil && $0.isUpgraded != true }
            .compactMap { transaction in transaction.purchaseDate.flatMap { purchase in transaction.expiresDate.map { (purchase, $0) } } }
            .max { $0.0 < $1.0 }
        guard let latest else { return false }
        return latest.1.unixMilliseconds > expires.unixMilliseconds
    }
}
