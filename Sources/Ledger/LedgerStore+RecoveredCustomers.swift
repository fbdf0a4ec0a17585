package import Foundation
import Logging
import PostgresNIO
package import SignedData

/// What the gap rules and pass 2 select from the ledger: customers a run recovered notifications
/// for, and every customer's view, a chunk at a time.
extension LedgerStore {
    // "Recovered" below: a notification from history (`source = 'history'`), or of the refund flow
    // however it was recorded (`RecoveredTypes.refundFlow`), of this environment, signed in the window or recorded since the run `runId` started, and recorded after its
    // account was last verified: what a run (or an earlier run of the window that died before its
    // pass 2, or whose pass 2 could not check the account) recovered and pass 2 has not checked:
    // recorded after its account's last check of the kind it needs (the transaction history for
    // `RecoveredTypes.needingTransactionHistory`, the statuses for the rest; `a` is its account, NULL: never checked).

    /// Which of these customers have a notification recovered by the runs, with those
    /// notifications (each with whether a refund decision was signed after it).
    package func recoveredCustomers(
        among customers: [String], pair: AppStorePair, from start: Date, to end: Date, sinceRun runId: UUID?, types: RecoveredTypes
    ) async throws -> [String: [RecoveredNotification]] {
        guard !customers.isEmpty else { return [:] }
        let rows = try await client.query(
            """
            SELECT n.original_transaction_id, array_agg(n.notification_type), array_agg(n.signed_date),
                array_agg(n.notification_type = ANY(\(types.refundFlow)) AND EXISTS (SELECT 1 FROM app_store.notifications d
                    WHERE d.bundle_id = n.bundle_id AND d.environment = n.environment AND d.original_transaction_id = n.original_transaction_id
                        AND d.notification_type = ANY(\(types.refundDecisions)) AND d.signed_date > n.signed_date))
            FROM app_store.notifications n
            LEFT JOIN app_store.account_members m ON m.bundle_id = n.bundle_id AND m.environment = n.environment AND m.original_transaction_id = n.original_transaction_id
            LEFT JOIN app_store.accounts a ON a.bundle_id = m.bundle_id AND a.environment = m.environment AND a.account_id = m.account_id
            WHERE n.original_transaction_id = ANY(\(customers)) AND n.bundle_id = \(pair.bundleId) AND n.environment = \(pair.environment.rawValue)
                AND (n.source = 'history' OR n.notification_type = ANY(\(types.refundFlow)))
                AND ((n.signed_date >= \(start) AND n.signed_date < \(end))
                    OR n.recorded_at >= (SELECT started_at FROM app_store.runs WHERE run_id = \(runId)))
                AND (CASE WHEN n.notification_type = ANY(\(types.needingTransactionHistory))
                    THEN a.transactions_verified_at IS NULL OR n.recorded_at > a.transactions_verified_at
                    ELSE a.verified_at IS NULL OR n.recorded_at > a.verified_at END)
            GROUP BY 1
            """,
            logger: logger
        )
        var found: [String: [RecoveredNotification]] = [:]
        for try await (customer, types, signed, decided) in rows.decode((String, [String], [Date], [Bool]).self) {
            found[customer] = Self.recorded(types, signed, decided)
        }
        return found
    }

    /// Customers without a subscription row (one-time purchases) with a notification recovered by
    /// the runs: up to `limit` after `cursor`, in order, with those notifications.
    package func customersRecoveredWithoutSubscription(
        pair: AppStorePair, from start: Date, to end: Date, sinceRun runId: UUID?, after cursor: String?, limit: Int, types: RecoveredTypes
    ) async throws -> [(customer: String, recorded: [RecoveredNotification])] {
        let rows = try await client.query(
            """
            SELECT n.original_transaction_id, array_agg(n.notification_type), array_agg(n.signed_date),
                array_agg(n.notification_type = ANY(\(types.refundFlow)) AND EXISTS (SELECT 1 FROM app_store.notifications d
                    WHERE d.bundle_id = n.bundle_id AND d.environment = n.environment AND d.original_transaction_id = n.original_transaction_id
                        AND d.notification_type = ANY(\(types.refundDecisions)) AND d.signed_date > n.signed_date))
            FROM app_store.notifications n
            LEFT JOIN app_store.account_members m ON m.bundle_id = n.bundle_id AND m.environment = n.environment AND m.original_transaction_id = n.original_transaction_id
            LEFT JOIN app_store.accounts a ON a.bundle_id = m.bundle_id AND a.environment = m.environment AND a.account_id = m.account_id
            WHERE n.original_transaction_id > \(cursor ?? "") AND n.bundle_id = \(pair.bundleId) AND n.environment = \(pair.environment.rawValue)
                AND (n.source = 'history' OR n.notification_type = ANY(\(types.refundFlow)))
                AND ((n.signed_date >= \(start) AND n.signed_date < \(end))
                    OR n.recorded_at >= (SELECT started_at FROM app_store.runs WHERE run_id = \(runId)))
                AND (CASE WHEN n.notification_type = ANY(\(types.needingTransactionHistory))
                    THEN a.transactions_verified_at IS NULL OR n.recorded_at > a.transactions_verified_at
                    ELSE a.verified_at IS NULL OR n.recorded_at > a.verified_at END)
                AND NOT EXISTS (SELECT 1 FROM app_store.subscriptions s
                    WHERE s.bundle_id = n.bundle_id AND s.environment = n.environment AND s.original_transaction_id = n.original_transaction_id)
            GROUP BY 1 ORDER BY 1 LIMIT \(limit)
            """,
            logger: logger
        )
        var found: [(customer: String, recorded: [RecoveredNotification])] = []
        for try await (customer, types, signed, decided) in rows.decode((String, [String], [Date], [Bool]).self) {
            found.append((customer, Self.recorded(types, signed, decided)))
        }
        return found
    }

    static func recorded(_ types: [String], _ signed: [Date], _ decided: [Bool]) -> [RecoveredNotification] {
        zip(types, zip(signed, decided)).map { RecoveredNotification(type: $0.0, signedDate: $0.1.0, decidedLater: $0.1.1) }
    }

    /// When each of these customers' latest refund decision (`types.refundDecisions`) was signed,
    /// for those that have one: a dry run's recovered refund requests are decided by it when it
    /// is later.
    package func latestRefundDecisions(among customers: [String], pair: AppStorePair, types: RecoveredTypes) async throws -> [String: Date] {
        guard !customers.isEmpty else { return [:] }
        let rows = try await client.query(
            """
            SELECT original_transaction_id, max(signed_date) FROM app_store.notifications
            WHERE original_transaction_id = ANY(\(customers)) AND bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue)
                AND notification_type = ANY(\(types.refundDecisions))
            GROUP BY 1
            """,
            logger: logger
        )
        var found: [String: Date] = [:]
        for try await (customer, signed) in rows.decode((String, Date).self) { found[customer] = signed }
        return found
    }

    /// The ledger views of up to `limit` subscription customers of this environment after
    /// `cursor`, in order: the gap rules stream through the whole ledger this way, a chunk at a
    /// time. Each view carries its account's last verifications and when each row was recorded,
    /// so that the rules look only at what is newer than the verification that covers it.
    package func customerViews(pair: AppStorePair, after cursor: String?, limit: Int) async throws -> [CustomerLedgerView] {
        let start = cursor ?? ""
        var views: [CustomerLedgerView] = []
        let rows = try await client.query(
            """
            SELECT m.account_id, a.verified_at, a.transactions_verified_at, \(unescaped: SubscriptionRecord.selectList(prefix: "s"))
            FROM app_store.subscriptions s
            LEFT JOIN app_store.account_members m ON m.bundle_id = s.bundle_id AND m.environment = s.environment AND m.original_transaction_id = s.original_transaction_id
            LEFT JOIN app_store.accounts a ON a.bundle_id = m.bundle_id AND a.environment = m.environment AND a.account_id = m.account_id
            WHERE s.bundle_id = \(pair.bundleId) AND s.environment = \(pair.environment.rawValue) AND s.original_transaction_id > \(start)
            ORDER BY s.original_transaction_id LIMIT \(limit)
            """,
            logger: logger
        )
        for try await row in rows {
            let cells = Array(row)
            let subscription = try SubscriptionRecord.read(cells, from: 3)
            views.append(
                CustomerLedgerView(
                    originalTransactionId: subscription.originalTransactionId, subscription: subscription, transactions: [], notifications: [],
                    accountId: try cells[0].decode(String?.self), verifiedAt: try cells[1].decode(Date?.self),
                    transactionsVerifiedAt: try cells[2].decode(Date?.self)
                )
            )
        }
        let ids = views.map(\.originalTransactionId)
        guard !ids.isEmpty else { return [] }
        var position: [String: Int] = [:]
        for (index, id) in ids.enumerated() { position[id] = index }
        let transactionRows = try await client.query(
            """
            SELECT original_transaction_id, transaction_id, product_type, purchase_date, expires_date, revocation_date, signed_date, updated_at, is_upgraded
            FROM app_store.transactions WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND original_transaction_id = ANY(\(ids)) ORDER BY purchase_date
            """,
            logger: logger
        )
        for try await row in transactionRows.decode((String, String, String?, Date?, Date?, Date?, Date, Date, Bool?).self) {
            guard let index = position[row.0] else { continue }
            views[index].transactions.append(
                .init(
                    transactionId: row.1, productType: row.2, purchaseDate: row.3, expiresDate: row.4, revocationDate: row.5, signedDate: row.6,
                    recordedAt: row.7, isUpgraded: row.8
                )
            )
        }
        let notificationRows = try await client.query(
            """
            SELECT original_transaction_id, notification_type, subtype, signed_date, recorded_at, transaction_id FROM app_store.notifications
            WHERE original_transaction_id = ANY(\(ids)) AND bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) ORDER BY signed_date
            """,
            logger: logger
        )
        for try await row in notificationRows.decode((String, String, String?, Date, Date, String?).self) {
            guard let index = position[row.0] else { continue }
            views[index].notifications.append(.init(type: row.1, subtype: row.2, signedDate: row.3, recordedAt: row.4, transactionId: row.5))
        }
        return views
    }
}
