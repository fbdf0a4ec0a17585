package import Decisions
package import Foundation
import LedgerModel
import Logging
package import PostgresNIO
package import SignedData

// What Apple owes each subscription (issue 64, point 1): stored with the row by its one writer
// (`RowsWrite`), filled in for rows written before migration 0029 (`DueBackfill`), and read where
// it is overdue (`LedgerStore.overdueCounts`, `app_store.overdue_subscriptions`).

extension Optional where Wrapped == SubscriptionDue {
    /// The batch JSON's fields for a row's `due_at` and `expected` (absent when nothing is owed).
    var jsonFields: KeyValuePairs<String, RowJSON.Field> {
        ["due_ms": .integer(self?.dueAt.unixMilliseconds), "expected": .text(self?.expected.rawValue)]
    }
}

/// Fills `due_at` and `expected` of the subscriptions written before migration 0029, by the rule
/// (`SubscriptionDue`), a batch at a time in key order, while the ledger stays in use: a row the
/// writer changed meanwhile (its signing time or status moved, or it has its due time already) is
/// left as the writer wrote it. Finds nothing to do in a ledger made after 0029: every row the
/// writer stored that owes something has its due time.
package struct DueBackfill: Sendable {
    package var batchRows: Int

    package init(batchRows: Int = 500) {
        self.batchRows = batchRows
    }

    /// Fills every row missing its due time; returns how many it filled.
    package func run(on connection: PostgresConnection, logger: Logger) async throws -> Int {
        let installed = try await connection.query(
            """
            SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('app_store.subscriptions') AND attname = 'due_at' AND NOT attisdropped)
            """,
            logger: logger
        ).collect().first?.decode(Bool.self) ?? false
        guard installed else { return 0 }
        var cursor = (bundleId: "", environment: "", id: "")
        var filled = 0
        while true {
            let rows = try await connection.query(
                """
                SELECT bundle_id, environment, original_transaction_id, status, expires_date, auto_renew_status, grace_period_expires_date, last_signed_date
                FROM app_store.subscriptions
                WHERE (bundle_id, environment, original_transaction_id) > (\(cursor.bundleId), \(cursor.environment), \(cursor.id))
                    AND due_at IS NULL AND status IN (1, 3, 4) AND expires_date IS NOT NULL
                ORDER BY bundle_id, environment, original_transaction_id LIMIT \(batchRows)
                """,
                logger: logger
            )
            var keys: (bundles: [String], environments: [String], ids: [String]) = ([], [], [])
            var dues: [Date] = []
            var expected: [String] = []
            var signed: [Date] = []
            var statuses: [Int] = []
            var read = 0
            for try await (bundleId, environment, id, status, expires, autoRenew, grace, lastSigned) in rows.decode(
                (String, String, String, Int?, Date?, Int?, Date?, Date).self
            ) {
                cursor = (bundleId, environment, id)
                read += 1
                var record = SubscriptionRecord(
                    originalTransactionId: id, productId: nil, status: status, expiresDate: expires, autoRenewStatus: autoRenew,
                    autoRenewProductId: nil, isInBillingRetry: nil, gracePeriodExpiresDate: grace, lastSignedDate: lastSigned
                )
                record.bundleId = bundleId
                guard let due = SubscriptionDue.of(record), let status else { continue }
                keys.bundles.append(bundleId)
                keys.environments.append(environment)
                keys.ids.append(id)
                dues.append(due.dueAt)
                expected.append(due.expected.rawValue)
                signed.append(lastSigned)
                statuses.append(status)
            }
            if !keys.ids.isEmpty {
                let updated = try await connection.query(
                    """
                    UPDATE app_store.subscriptions s SET due_at = u.due_at, expected = u.expected
                    FROM unnest(\(keys.bundles)::text[], \(keys.environments)::text[], \(keys.ids)::text[], \(dues)::timestamptz[],
                        \(expected)::text[], \(signed)::timestamptz[], \(statuses)::int[])
                        AS u(bundle_id, environment, original_transaction_id, due_at, expected, last_signed_date, status)
                    WHERE s.bundle_id = u.bundle_id AND s.environment = u.environment AND s.original_transaction_id = u.original_transaction_id
                        AND s.due_at IS NULL AND s.last_signed_date = u.last_signed_date AND s.status = u.status
                    RETURNING 1
                    """,
                    logger: logger
                ).collect()
                filled += updated.count
            }
            // A short batch was the last.
            if read < batchRows { return filled }
        }
    }
}

/// One subscription Apple owes a notification it has not sent (or the ledger did not record).
package struct OverdueSubscription: Hashable, Sendable {
    package var pair: AppStorePair
    package var originalTransactionId: String
    package var expected: SubscriptionDue.Expected?
    package var dueAt: Date
}

extension LedgerStore {
    /// The subscriptions `s` with their accounts' verifications `a` (left joined: an account
    /// never verified has none), what both overdue reads select from (as the view of 0029 does).
    static let subscriptionsWithTheirAccounts = """
        FROM app_store.subscriptions s
        LEFT JOIN app_store.account_members m
            ON m.bundle_id = s.bundle_id AND m.environment = s.environment AND m.original_transaction_id = s.original_transaction_id
        LEFT JOIN app_store.accounts a ON a.bundle_id = m.bundle_id AND a.environment = m.environment AND a.account_id = m.account_id
        """

    /// How many subscriptions of each of `pairs` Apple owes a notification due more than `after`
    /// ago at `now`, with nothing recorded and the account not verified since (what
    /// `app_store.overdue_subscriptions` lists): a range scan of `subscriptions_due_idx` over the
    /// overdue rows alone, whatever the ledger's size. Pairs with none are absent.
    /// - Parameter pairs: nil: every App Store the ledger holds.
    package func overdueCounts(for pairs: [AppStorePair]?, now: Date, after: TimeInterval) async throws -> [AppStorePair: Int] {
        let ordered = (pairs ?? []).sorted()
        let rows = try await client.query(
            """
            SELECT s.bundle_id, s.environment, count(*)
            \(unescaped: Self.subscriptionsWithTheirAccounts)
            WHERE s.due_at < \(now.addingTimeInterval(-after))
                AND (a.verified_at IS NULL OR a.verified_at < s.due_at + make_interval(secs => \(after)))
                AND (\(pairs == nil) OR (s.bundle_id, s.environment) IN (SELECT * FROM unnest(\(ordered.map(\.bundleId))::text[], \(ordered.map(\.environment.rawValue))::text[])))
            GROUP BY s.bundle_id, s.environment
            """,
            logger: logger
        )
        var counts: [AppStorePair: Int] = [:]
        for try await (bundleId, environment, count) in rows.decode((String, String, Int).self) {
            counts[AppStorePair(bundleId: bundleId, environment: AppStoreEnvironment(rawValue: environment))] = count
        }
        return counts
    }

    /// The overdue subscriptions of `pair`, most overdue first, up to `limit` (for `status` and reports).
    package func overdueSubscriptions(pair: AppStorePair, now: Date, after: TimeInterval, limit: Int) async throws -> [OverdueSubscription] {
        let rows = try await client.query(
            """
            SELECT s.original_transaction_id, s.expected, s.due_at
            \(unescaped: Self.subscriptionsWithTheirAccounts)
            WHERE s.due_at < \(now.addingTimeInterval(-after))
                AND (a.verified_at IS NULL OR a.verified_at < s.due_at + make_interval(secs => \(after)))
                AND s.bundle_id = \(pair.bundleId) AND s.environment = \(pair.environment.rawValue)
            ORDER BY s.due_at, s.original_transaction_id LIMIT \(limit)
            """,
            logger: logger
        )
        var found: [OverdueSubscription] = []
        for try await (id, expected, due) in rows.decode((String, String?, Date).self) {
            found.append(OverdueSubscription(pair: pair, originalTransactionId: id, expected: expected.flatMap(SubscriptionDue.Expected.init(rawValue:)), dueAt: due))
        }
        return found
    }
}
