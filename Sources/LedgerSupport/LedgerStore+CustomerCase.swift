package import Foundation
import Ledger
package import LedgerModel
import Logging
import PostgresNIO
package import SignedData

/// What `customer` reads of one account: the notifications recorded for it, what the
/// entitlements view grants it now, and the accounts an appAccountToken names.
extension LedgerStore {
    /// The notifications recorded for these originalTransactionIds, in the order Apple signed them.
    package func recordedNotifications(of members: [String], pair: AppStorePair) async throws -> [RecordedNotification] {
        guard !members.isEmpty else { return [] }
        let rows = try await client.query(
            """
            SELECT notification_uuid::text, notification_type, subtype, signed_date, source, recorded_at, original_transaction_id
            FROM app_store.notifications
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND original_transaction_id = ANY(\(members)::text[])
            ORDER BY signed_date, notification_uuid
            """,
            logger: logger
        )
        var found: [RecordedNotification] = []
        for try await (uuid, type, subtype, signed, source, recorded, customer) in rows.decode((String, String, String?, Date, String, Date, String).self) {
            found.append(
                RecordedNotification(
                    notificationUUID: uuid, type: type, subtype: subtype, signedDate: signed, source: source, recordedAt: recorded, originalTransactionId: customer)
            )
        }
        return found
    }

    /// What `app_store.entitlements` grants these originalTransactionIds now.
    package func entitlements(of members: [String], pair: AppStorePair) async throws -> [Entitlement] {
        guard !members.isEmpty else { return [] }
        let rows = try await client.query(
            """
            SELECT original_transaction_id, product_id, product_type, expires_date, status
            FROM app_store.entitlements
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND original_transaction_id = ANY(\(members)::text[])
            ORDER BY original_transaction_id
            """,
            logger: logger
        )
        var found: [Entitlement] = []
        for try await (customer, product, type, expires, status) in rows.decode((String, String?, String?, Date?, Int16?).self) {
            found.append(Entitlement(originalTransactionId: customer, productId: product, productType: type, expiresDate: expires, status: status.map(Int.init)))
        }
        return found
    }

    /// The originalTransactionIds whose purchases carry this appAccountToken, one per account
    /// (the account's first member the ledger knows; an ID no repair has grouped yet stands alone).
    package func customers(withAppAccountToken token: UUID, pair: AppStorePair) async throws -> [String] {
        let rows = try await client.query(
            """
            WITH named AS (
                SELECT original_transaction_id FROM app_store.subscriptions
                WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND app_account_token = \(token)
                UNION SELECT original_transaction_id FROM app_store.transactions
                WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND app_account_token = \(token)
            )
            SELECT min(n.original_transaction_id)
            FROM named n
            LEFT JOIN app_store.account_members m
              ON m.bundle_id = \(pair.bundleId) AND m.environment = \(pair.environment.rawValue) AND m.original_transaction_id = n.original_transaction_id
            GROUP BY coalesce(m.account_id, n.original_transaction_id)
            ORDER BY 1
            """,
            logger: logger
        )
        var found: [String] = []
        for try await customer in rows.decode(String.self) { found.append(customer) }
        return found
    }
}

