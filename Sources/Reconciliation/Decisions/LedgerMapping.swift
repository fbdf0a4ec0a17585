import AppStoreServerAPI
import Foundation
import Ledger
import SignedData

/// How verified payloads become ledger rows.
enum LedgerMapping {
    static func date(_ milliseconds: UnixMilliseconds?) -> Date? {
        milliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) }
    }

    static func notificationRecord(_ notification: VerifiedNotification, signedPayload: String, source: NotificationRecord.Source, uuid: UUID) -> NotificationRecord {
        let payload = notification.payload
        return NotificationRecord(
            notificationUUID: uuid, notificationType: payload.notificationType.rawValue, subtype: payload.subtype?.rawValue,
            signedDate: date(payload.signedDate) ?? Date(), environment: environmentOf(payload)?.rawValue ?? "",
            originalTransactionId: notification.transaction?.originalTransactionId ?? notification.renewalInfo?.originalTransactionId,
            transactionId: notification.transaction?.transactionId, signedPayload: signedPayload, source: source
        )
    }

    /// Notifications about a refund request: their transaction is the one refunded, not the latest.
    static let refundFlow: Set<NotificationType> = [.refund, .refundReversed, .refundDeclined, .consumptionRequest]

    static func environmentOf(_ payload: NotificationPayload) -> AppStoreEnvironment? {
        payload.data?.environment ?? payload.summary?.environment ?? payload.appData?.environment
            ?? payload.externalPurchaseToken?.inferredEnvironment
    }

    static func transactionRecord(_ transaction: TransactionPayload, signed: String, fallbackSignedDate: UnixMilliseconds?) -> TransactionRecord? {
        guard let id = transaction.transactionId, let original = transaction.originalTransactionId,
            let signedDate = date(transaction.signedDate ?? fallbackSignedDate)
        else { return nil }
        return TransactionRecord(
            transactionId: id, originalTransactionId: original, productId: transaction.productId,
            productType: transaction.type?.rawValue, purchaseDate: date(transaction.purchaseDate),
            expiresDate: date(transaction.expiresDate), revocationDate: date(transaction.revocationDate),
            revocationReason: transaction.revocationReason, isUpgraded: transaction.isUpgraded, signedDate: signedDate,
            environment: transaction.environment?.rawValue, signedTransaction: signed
        )
    }

    /// The subscription's state a notification reports, as of its `signedDate`; fields the
    /// notification does not carry keep their current value.
    static func subscriptionRecord(_ notification: VerifiedNotification, current: SubscriptionRecord?) -> SubscriptionRecord? {
        let transaction = notification.transaction
        let renewal = notification.renewalInfo
        let isSubscription = renewal != nil || transaction?.type == .autoRenewable
        guard isSubscription, let original = transaction?.originalTransactionId ?? renewal?.originalTransactionId,
            let signedDate = date(notification.payload.signedDate)
        else { return nil }
        // Never backwards: a refund-flow notification (REFUND, REFUND_REVERSED, REFUND_DECLINED,
        // CONSUMPTION_REQUEST) carries the transaction the request is about, which may be older
        // than the one the row holds. Its expiry and product then stay the row's; its status and
        // renewal info still apply. Other notifications carry the latest transaction, whose expiry
        // may legitimately be earlier (an upgrade to a shorter period).
        let expires = date(transaction?.expiresDate)
        let older = Self.refundFlow.contains(notification.payload.notificationType)
            && (expires.map { new in current?.expiresDate.map { new.unixMilliseconds < $0.unixMilliseconds } ?? false } ?? true)
        return SubscriptionRecord(
            originalTransactionId: original,
            productId: older ? current?.productId ?? transaction?.productId : transaction?.productId,
            status: notification.payload.data?.status?.rawValue ?? current?.status,
            expiresDate: older ? current?.expiresDate ?? expires : expires,
            autoRenewStatus: renewal?.autoRenewStatus ?? current?.autoRenewStatus,
            autoRenewProductId: renewal?.autoRenewProductId ?? current?.autoRenewProductId,
            isInBillingRetry: renewal?.isInBillingRetryPeriod ?? (renewal == nil ? current?.isInBillingRetry : false),
            gracePeriodExpiresDate: renewal == nil ? current?.gracePeriodExpiresDate : date(renewal?.gracePeriodExpiresDate),
            lastSignedDate: signedDate, environment: environmentOf(notification.payload)?.rawValue ?? current?.environment
        )
    }
}
