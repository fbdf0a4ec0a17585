import Foundation
import Ledger

/// Why a customer is repaired through Get Transaction History. The raw values are stable: they
/// appear in reports.
package enum GapReason: String, Hashable, Sendable, Codable, CaseIterable {
    /// A notification of this customer was recovered from history (or found stale) by this run,
    /// in its window: history holds point-in-time snapshots, so ask Apple for the present.
    case recoveredInWindow = "recovered-in-window"
    /// A payload of this customer was rejected or left for retry in the window.
    case payloadRejected = "payload-rejected"
    /// The subscription is recorded active, but its expiry (and grace period) have passed with
    /// no renewal or expiry recorded since.
    case activeButExpired = "active-but-expired"
    /// The subscription is recorded in its billing grace period (status 4), but the grace
    /// period ended with no renewal, expiry or grace-period expiry recorded since.
    case gracePeriodEnded = "grace-period-ended"
    /// The subscription is recorded in billing retry (status 3), but Apple's billing retry (up to
    /// 60 days after the expiry) is over with no renewal or expiry recorded since.
    case billingRetryEnded = "billing-retry-ended"
    /// The subscription row is older than the customer's newest transaction.
    case rowOlderThanTransactions = "row-older-than-transactions"
    /// A renewal was purchased after the previous period had expired, with no billing failure
    /// or expiry recorded in between: a period's notifications are missing.
    case transactionChainGap = "transaction-chain-gap"
    /// The notifications skip a step: expired voluntarily without auto-renew turned off, or
    /// for billing without a billing failure.
    case skippedStep = "skipped-step"
    /// A refund-flow notification (REFUND, REFUND_REVERSED, REFUND_DECLINED, CONSUMPTION_REQUEST)
    /// was recorded after the account's transaction history was last checked: it is about the
    /// transaction refunded (perhaps a plan the customer upgraded from), so the row keeps its
    /// product and expiry, and Apple is asked for the current transaction.
    case refundFlow = "refund-flow"
    /// Named by the operator (`repair --transaction-id`).
    case named
}

/// The rules that find customers whose records contradict themselves, as pure functions of
/// what the ledger holds for one customer and the current time.
///
/// Each contradiction counts only when it is newer than the account's last verification against
/// Apple: pass 2 cannot change what the notifications say (a chain gap, a skipped step stays in
/// them forever), so once Apple's answer has been applied, only what the ledger records after it,
/// or an expiry that passes after it, selects the account again.
package enum GapRules {
    /// How long after an expiry a renewal may still legitimately be on its way.
    package static let expiryTolerance: TimeInterval = 3600

    package static func evaluate(_ view: CustomerLedgerView, now: Date) -> [GapReason] {
        var reasons: [GapReason] = []
        if isActiveButExpired(view, now: now) { reasons.append(.activeButExpired) }
        if isInGracePeriodPastItsEnd(view, now: now) { reasons.append(.gracePeriodEnded) }
        if isInBillingRetryPastItsEnd(view, now: now) { reasons.append(.billingRetryEnded) }
        if isRowOlderThanTransactions(view) { reasons.append(.rowOlderThanTransactions) }
        if hasTransactionChainGap(view) { reasons.append(.transactionChainGap) }
        if skipsAStep(view) { reasons.append(.skippedStep) }
        if hasUncheckedRefundFlow(view) { reasons.append(.refundFlow) }
        return reasons
    }

    /// Recorded active, but the period (and grace period) ended over an hour ago, and no
    /// verification happened since then.
    static func isActiveButExpired(_ view: CustomerLedgerView, now: Date) -> Bool {
        guard let subscription = view.subscription, subscription.status == 1, let expires = subscription.expiresDate else { return false }
        return isOverdue(max(expires, subscription.gracePeriodExpiresDate ?? expires), view, now: now)
    }

    /// How long Apple retries billing after a failed renewal ("for up to 60 days").
    package static let billingRetryDuration: TimeInterval = 60 * 86_400

    /// Recorded in the billing grace period, but the grace period (else the period) ended over an
    /// hour ago, and no verification happened since then.
    static func isInGracePeriodPastItsEnd(_ view: CustomerLedgerView, now: Date) -> Bool {
        guard let subscription = view.subscription, subscription.status == 4,
            let end = subscription.gracePeriodExpiresDate ?? subscription.expiresDate
        else { return false }
        return isOverdue(end, view, now: now)
    }

    /// Recorded in billing retry, but Apple's retrying (60 days after the expiry) ended over an
    /// hour ago, and no verification happened since then.
    static func isInBillingRetryPastItsEnd(_ view: CustomerLedgerView, now: Date) -> Bool {
        guard let subscription = view.subscription, subscription.status == 3, let expires = subscription.expiresDate else { return false }
        return isOverdue(expires.addingTimeInterval(billingRetryDuration), view, now: now)
    }

    /// `end` plus the tolerance has passed, and the account was not verified since.
    static func isOverdue(_ end: Date, _ view: CustomerLedgerView, now: Date) -> Bool {
        let overdue = end.addingTimeInterval(expiryTolerance)
        guard overdue < now else { return false }
        return view.verifiedAt.map { $0 < overdue } ?? true
    }

    /// Whether answering for this reason needs the account's transaction history (older or
    /// one-time transactions, refunds), or the subscription statuses alone tell the truth.
    package static func needsTransactionHistory(_ reason: GapReason) -> Bool {
        switch reason {
        case .payloadRejected, .transactionChainGap, .refundFlow, .named: true
        case .recoveredInWindow, .activeButExpired, .gracePeriodEnded, .billingRetryEnded, .rowOlderThanTransactions, .skippedStep: false
        }
    }

    /// Whether the ledger recorded this after the account's last verification (always, when
    /// never verified, or when the time of recording is unknown).
    static func isNews(_ recordedAt: Date?, _ view: CustomerLedgerView) -> Bool {
        isNews(recordedAt, since: view.verifiedAt)
    }

    static func isNews(_ recordedAt: Date?, since verified: Date?) -> Bool {
        guard let verified, let recordedAt else { return true }
        return recordedAt > verified
    }

    static func isRowOlderThanTransactions(_ view: CustomerLedgerView) -> Bool {
        guard let subscription = view.subscription,
            let newest = view.transactions.filter({ isNews($0.recordedAt, view) }).map(\.signedDate).max()
        else { return false }
        return subscription.lastSignedDate.unixMilliseconds < newest.unixMilliseconds
    }

    static func hasTransactionChainGap(_ view: CustomerLedgerView) -> Bool {
        let renewals = view.transactions
            .filter { $0.productType == nil || $0.productType == "Auto-Renewable Subscription" }
            .filter { $0.purchaseDate != nil && $0.expiresDate != nil }
            .sorted { $0.purchaseDate! < $1.purchaseDate! }
        for (previous, next) in zip(renewals, renewals.dropFirst()) where isNews(next.recordedAt, since: view.transactionsVerifiedAt) {
            let lapseStart = previous.expiresDate!
            let lapseEnd = next.purchaseDate!
            guard lapseEnd.unixMilliseconds > lapseStart.unixMilliseconds + 60_000 else { continue }
            let explained = view.notifications.contains { notification in
                ["DID_FAIL_TO_RENEW", "EXPIRED", "GRACE_PERIOD_EXPIRED", "REFUND", "REVOKE"].contains(notification.type)
                    && notification.signedDate >= lapseStart.addingTimeInterval(-60) && notification.signedDate <= lapseEnd
            }
            if !explained { return true }
        }
        return false
    }

    static let refundFlowTypes = Set(LedgerStore.refundFlowTypes)

    /// A refund-flow notification recorded (live or recovered) since the account's transaction
    /// history was last compared with Apple's.
    static func hasUncheckedRefundFlow(_ view: CustomerLedgerView) -> Bool {
        view.notifications.contains { refundFlowTypes.contains($0.type) && isNews($0.recordedAt, since: view.transactionsVerifiedAt) }
    }

    static func skipsAStep(_ view: CustomerLedgerView) -> Bool {
        var sinceRenewal: [CustomerLedgerView.NotificationFacts] = []
        for notification in view.notifications.sorted(by: { $0.signedDate < $1.signedDate }) {
            if notification.type == "SUBSCRIBED" || notification.type == "DID_RENEW" {
                sinceRenewal = []
                continue
            }
            if notification.type == "EXPIRED", isNews(notification.recordedAt, view) {
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
