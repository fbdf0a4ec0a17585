import Foundation

/// A batch's rows as one JSON array per table (written by `RowJSON`), for `jsonb_to_recordset`:
/// one statement writes a page's notifications, transactions and subscriptions instead of a
/// round trip per row. Every value still travels as a bound parameter (the JSON text is one).
/// Times are UNIX milliseconds, the precision of everything Apple signs, turned into
/// timestamptz exactly by `timestamptz 'epoch' + ms * interval '1 millisecond'`. The signed
/// payloads, a few kilobytes each, are not in the JSON: they travel beside it as one text
/// array, joined to the rows by key (`unnest(keys, payloads) … USING (key)`), so that neither
/// side escapes and parses them as JSON.
enum LedgerBatchRows {
    struct Notification: Encodable {
        var notification_uuid: String
        var notification_type: String
        var subtype: String?
        var signed_ms: Int64
        var environment: String
        var original_transaction_id: String?
        var transaction_id: String?
        var source: String
    }

    struct Transaction: Encodable {
        var transaction_id: String
        var original_transaction_id: String
        var product_id: String?
        var product_type: String?
        var purchase_ms: Int64?
        var expires_ms: Int64?
        var revocation_ms: Int64?
        var revocation_reason: Int?
        var is_upgraded: Bool?
        var signed_ms: Int64
        var environment: String?
    }

    struct Subscription: Codable {
        var original_transaction_id: String
        var product_id: String?
        var status: Int?
        var expires_ms: Int64?
        var auto_renew_status: Int?
        var auto_renew_product_id: String?
        var is_in_billing_retry: Bool?
        var grace_period_expires_ms: Int64?
        var last_signed_ms: Int64
        var environment: String?
    }

    /// The rows, and their signed payloads in the same order.
    static func notifications(_ records: [NotificationRecord]) -> (rows: [Notification], payloads: [String]) {
        let rows = records.map {
            Notification(
                notification_uuid: $0.notificationUUID.uuidString, notification_type: $0.notificationType, subtype: $0.subtype,
                signed_ms: $0.signedDate.unixMilliseconds, environment: $0.environment, original_transaction_id: $0.originalTransactionId,
                transaction_id: $0.transactionId, source: $0.source.rawValue
            )
        }
        return (rows, records.map(\.signedPayload))
    }

    /// One row per transaction: the newest signed version in the batch (the first of equals), as
    /// applying them one by one would leave it.
    static func transactions(_ records: [TransactionRecord]) -> (rows: [Transaction], payloads: [String]) {
        let newest = newestPerKey(records, key: \.transactionId, date: \.signedDate)
        let rows = newest.map {
            Transaction(
                transaction_id: $0.transactionId, original_transaction_id: $0.originalTransactionId, product_id: $0.productId,
                product_type: $0.productType, purchase_ms: $0.purchaseDate?.unixMilliseconds, expires_ms: $0.expiresDate?.unixMilliseconds,
                revocation_ms: $0.revocationDate?.unixMilliseconds, revocation_reason: $0.revocationReason, is_upgraded: $0.isUpgraded,
                signed_ms: $0.signedDate.unixMilliseconds, environment: $0.environment
            )
        }
        return (rows, newest.map(\.signedTransaction))
    }

    static func subscriptions(_ records: [SubscriptionRecord]) -> [Subscription] {
        newestPerKey(records, key: \.originalTransactionId, date: \.lastSignedDate).map(subscription)
    }

    static func subscription(_ record: SubscriptionRecord) -> Subscription {
        Subscription(
            original_transaction_id: record.originalTransactionId, product_id: record.productId, status: record.status,
            expires_ms: record.expiresDate?.unixMilliseconds, auto_renew_status: record.autoRenewStatus,
            auto_renew_product_id: record.autoRenewProductId, is_in_billing_retry: record.isInBillingRetry,
            grace_period_expires_ms: record.gracePeriodExpiresDate?.unixMilliseconds, last_signed_ms: record.lastSignedDate.unixMilliseconds,
            environment: record.environment
        )
    }

    static func record(_ row: Subscription) -> SubscriptionRecord {
        func date(_ ms: Int64?) -> Date? { ms.map { Date(timeIntervalSince1970: Double($0) / 1000) } }
        return SubscriptionRecord(
            originalTransactionId: row.original_transaction_id, productId: row.product_id, status: row.status,
            expiresDate: date(row.expires_ms), autoRenewStatus: row.auto_renew_status, autoRenewProductId: row.auto_renew_product_id,
            isInBillingRetry: row.is_in_billing_retry, gracePeriodExpiresDate: date(row.grace_period_expires_ms),
            lastSignedDate: date(row.last_signed_ms)!, environment: row.environment
        )
    }

    /// A subscription a run changed: before (nil: none) and after.
    struct SubscriptionChange: Encodable {
        var original_transaction_id: String
        var before: Subscription?
        var after: Subscription
    }

    static func newestPerKey<Record>(_ records: [Record], key: KeyPath<Record, String>, date: KeyPath<Record, Date>) -> [Record] {
        var chosen: [String: Int] = [:]
        for (index, record) in records.enumerated() {
            if let current = chosen[record[keyPath: key]], records[current][keyPath: date].unixMilliseconds >= record[keyPath: date].unixMilliseconds {
                continue
            }
            chosen[record[keyPath: key]] = index
        }
        // In key order: two batches writing the same rows lock them in the same order, so they
        // wait for each other rather than deadlock.
        return chosen.sorted { $0.key < $1.key }.map { records[$0.value] }
    }
}
