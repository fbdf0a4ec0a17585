import AppStoreServerModel
import Foundation
import LedgerModel
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
            signedDate: date(payload.signedDate) ?? Date(), environment: notification.identity?.environment?.rawValue ?? "", bundleId: notification.identity?.bundleId ?? "",
            originalTransactionId: notification.originalTransactionId,
            transactionId: notification.transaction?.transactionId, signedPayload: signedPayload, source: source,
            refundEpisode: payload.notificationType.policy.refundEpisode
        )
    }

    /// The refund request a CONSUMPTION_REQUEST asks the app to answer, and by when
    /// (`ConsumptionDeadline`); nil for any other notification.
    static func consumptionRequest(_ notification: VerifiedNotification, record: NotificationRecord, firstAttempt: Date?) -> ConsumptionRequestRecord? {
        guard notification.payload.notificationType.policy.refundEpisode == .request, let original = record.originalTransactionId else { return nil }
        return ConsumptionRequestRecord(
            notificationUUID: record.notificationUUID, environment: record.environment, bundleId: record.bundleId, originalTransactionId: original,
            transactionId: record.transactionId, productId: notification.transaction?.productId,
            appAccountToken: notification.transaction?.appAccountToken.flatMap(UUID.init(uuidString:)),
            reason: notification.payload.data?.consumptionRequestReason,
            sentDate: ConsumptionDeadline.sentAt(firstAttempt: firstAttempt, signedDate: record.signedDate),
            deadlineDate: ConsumptionDeadline.deadline(firstAttempt: firstAttempt, signedDate: record.signedDate)
        )
    }



    static func transactionRecord(_ transaction: TransactionPayload, signed: String, fallbackSignedDate: UnixMilliseconds?) -> TransactionRecord? {
        guard let id = transaction.transactionId, let original = transaction.originalTransactionId,
            let signedDate = date(transaction.signedDate ?? fallbackSignedDate)
        else { return nil }
        var record = TransactionRecord(
            transactionId: id, originalTransactionId: original, productId: transaction.productId,
            productType: transaction.type?.rawValue, purchaseDate: date(transaction.purchaseDate),
            expiresDate: date(transaction.expiresDate), revocationDate: date(transaction.revocationDate),
            revocationReason: transaction.revocationReason, isUpgraded: transaction.isUpgraded, signedDate: signedDate,
            environment: transaction.environment?.rawValue, bundleId: transaction.bundleId, signedTransaction: signed
        )
        record.appAccountToken = transaction.appAccountToken.flatMap(UUID.init(uuidString:))
        record.inAppOwnershipType = transaction.inAppOwnershipType
        record.subscriptionGroupIdentifier = transaction.subscriptionGroupIdentifier
        record.webOrderLineItemId = transaction.webOrderLineItemId
        record.quantity = transaction.quantity
        record.price = transaction.price
        record.currency = transaction.currency
        record.storefront = transaction.storefront
        record.offerType = transaction.offerType
        record.offerIdentifier = transaction.offerIdentifier
        record.transactionReason = transaction.transactionReason
        record.revocationType = transaction.revocationType
        record.revocationPercentage = transaction.revocationPercentage
        record.appTransactionId = transaction.appTransactionId
        record.originalPurchaseDate = date(transaction.originalPurchaseDate)
        record.offerDiscountType = transaction.offerDiscountType
        record.offerPeriod = transaction.offerPeriod
        record.storefrontId = transaction.storefrontId
        record.previousOriginalTransactionId = transaction.previousOriginalTransactionId
        return record
    }

    /// The facts a backend queries about a subscription (migration 0006): the customer's token,
    /// group and ownership from the transaction (else the renewal info's token), the next
    /// renewal's from the renewal info. What the payloads do not carry keeps `current`'s value
    /// (a notification without renewal info says nothing about the next renewal). Migration
    /// 0023's: the app download's transaction ID (the transaction's, else the row's, else the
    /// renewal info's), the subscription it continues after a migration by Apple (kept once
    /// said), and the next renewal's date, offer payment mode and period, and win-back offers.
    static func describe(_ record: inout SubscriptionRecord, transaction: TransactionPayload?, renewal: RenewalInfoPayload?, current: SubscriptionRecord?) {
        // A token that is not a UUID counts as none, as in migration 0006's backfill.
        let token = transaction?.appAccountToken.flatMap(UUID.init(uuidString:)) ?? renewal?.appAccountToken.flatMap(UUID.init(uuidString:))
        record.appAccountToken = token ?? current?.appAccountToken
        record.subscriptionGroupIdentifier = transaction?.subscriptionGroupIdentifier ?? current?.subscriptionGroupIdentifier
        record.inAppOwnershipType = transaction?.inAppOwnershipType ?? current?.inAppOwnershipType
        record.appTransactionId = transaction?.appTransactionId ?? current?.appTransactionId ?? renewal?.appTransactionId
        record.previousOriginalTransactionId = transaction?.previousOriginalTransactionId ?? current?.previousOriginalTransactionId
        guard let renewal else {
            record.expirationIntent = current?.expirationIntent
            record.priceIncreaseStatus = current?.priceIncreaseStatus
            record.renewalPrice = current?.renewalPrice
            record.currency = current?.currency
            record.offerType = current?.offerType
            record.offerIdentifier = current?.offerIdentifier
            record.renewalDate = current?.renewalDate
            record.offerDiscountType = current?.offerDiscountType
            record.offerPeriod = current?.offerPeriod
            record.eligibleWinBackOfferIds = current?.eligibleWinBackOfferIds
            return
        }
        record.expirationIntent = renewal.expirationIntent
        record.priceIncreaseStatus = renewal.priceIncreaseStatus
        record.renewalPrice = renewal.renewalPrice
        record.currency = renewal.currency
        record.offerType = renewal.offerType
        record.offerIdentifier = renewal.offerIdentifier
        record.renewalDate = date(renewal.renewalDate)
        record.offerDiscountType = renewal.offerDiscountType
        record.offerPeriod = renewal.offerPeriod
        record.eligibleWinBackOfferIds = renewal.eligibleWinBackOfferIds
    }

    /// The subscription's state a notification reports, as of its `signedDate`; fields the
    /// notification does not carry keep their current value.
    package static func subscriptionRecord(_ notification: VerifiedNotification, current: SubscriptionRecord?) -> SubscriptionRecord? {
        let transaction = notification.transaction
        let isSubscription = notification.renewalInfo != nil || transaction?.type == .autoRenewable
        guard isSubscription, let original = transaction?.originalTransactionId ?? notification.renewalInfo?.originalTransactionId,
            let signedDate = date(notification.payload.signedDate)
        else { return nil }
        // Renewal info signed before the row's is no news: the row keeps the later one.
        let renewal = notification.renewalInfo.flatMap { info in
            isNewer(info, notification, than: current?.renewalSignedDate) ? info : nil
        }
        // A refund-flow notification (REFUND, REFUND_REVERSED, REFUND_DECLINED,
        // CONSUMPTION_REQUEST) carries the transaction the request is about, not the latest: an
        // earlier period, or a plan the customer upgraded from (`isUpgraded`: an annual plan
        // upgraded to a monthly one expires later than the current plan). Its product and expiry
        // move the row only forward, and never from an upgraded-from transaction; its status and
        // renewal info apply, and pass 2 asks Apple for the current transaction
        // (`UncheckedRefundFlow`). Taking its product and expiry never at all would make
        // the row depend on the order notifications arrive in (a refund applied over a row that
        // is still older than the transaction it carries would pin the older expiry, and the
        // renewal arriving after it is stale): the order-independence property forbids that.
        // Other notifications carry the latest transaction, whose expiry may legitimately be
        // earlier (an upgrade to a shorter period).
        let expires = date(transaction?.expiresDate)
        let aboutAnotherTransaction = notification.payload.notificationType.policy.refundFlow && current != nil
            && (transaction?.isUpgraded == true
                || (expires.map { new in current?.expiresDate.map { new.unixMilliseconds < $0.unixMilliseconds } ?? false } ?? true))
        var record = SubscriptionRecord(
            originalTransactionId: original,
            productId: aboutAnotherTransaction ? current?.productId ?? transaction?.productId : transaction?.productId,
            status: notification.payload.data?.status?.rawValue ?? current?.status,
            expiresDate: aboutAnotherTransaction ? current?.expiresDate ?? expires : expires,
            autoRenewStatus: nil, autoRenewProductId: nil, isInBillingRetry: nil, gracePeriodExpiresDate: nil,
            lastSignedDate: signedDate, environment: notification.identity?.environment?.rawValue ?? current?.environment,
            bundleId: notification.identity?.bundleId ?? transaction?.bundleId ?? current?.bundleId
        )
        takeRenewal(&record, from: renewal, of: notification, current: current)
        describe(&record, transaction: transaction, renewal: renewal, current: current)
        return record
    }

    /// The renewal state on `record`: `renewal`'s, or without it `current`'s (a notification
    /// without renewal info says nothing about the next renewal).
    static func takeRenewal(
        _ record: inout SubscriptionRecord, from renewal: RenewalInfoPayload?, of notification: VerifiedNotification, current: SubscriptionRecord?
    ) {
        record.autoRenewStatus = renewal?.autoRenewStatus ?? current?.autoRenewStatus
        record.autoRenewProductId = renewal?.autoRenewProductId ?? current?.autoRenewProductId
        record.isInBillingRetry = renewal.map { $0.isInBillingRetryPeriod ?? false } ?? current?.isInBillingRetry
        record.gracePeriodExpiresDate = renewal.map { date($0.gracePeriodExpiresDate) } ?? current?.gracePeriodExpiresDate
        record.renewalSignedDate = renewal != nil ? renewalSignedDate(notification) : current?.renewalSignedDate
    }

    /// The row a notification signed before `current` makes when it carries renewal info signed
    /// after the row's (the row's latest notification had none): `current` with that renewal
    /// info's fields, its signing time unchanged. Nil when the notification has nothing newer; a
    /// row without a renewal signing time (written before migration 0019) counts as having
    /// renewal info as of its own signing time.
    static func renewalMerged(_ notification: VerifiedNotification, into current: SubscriptionRecord) -> SubscriptionRecord? {
        guard let renewal = notification.renewalInfo, renewal.originalTransactionId == nil || renewal.originalTransactionId == current.originalTransactionId,
            isNewer(renewal, notification, than: current.renewalSignedDate ?? current.lastSignedDate)
        else { return nil }
        var merged = current
        takeRenewal(&merged, from: renewal, of: notification, current: current)
        describe(&merged, transaction: nil, renewal: renewal, current: current)
        return merged
    }

    /// When the notification's renewal info was signed: its own `signedDate`, else the
    /// notification's.
    static func renewalSignedDate(_ notification: VerifiedNotification) -> Date? {
        date(notification.renewalInfo?.signedDate ?? notification.payload.signedDate)
    }

    static func isNewer(_ renewal: RenewalInfoPayload, _ notification: VerifiedNotification, than known: Date?) -> Bool {
        guard let known else { return true }
        guard let signed = date(renewal.signedDate ?? notification.payload.signedDate) else { return false }
        return signed.unixMilliseconds > known.unixMilliseconds
    }
}
