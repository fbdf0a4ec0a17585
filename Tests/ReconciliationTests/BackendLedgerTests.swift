import AppStoreServerAPI
import AppStoreSimulator
import Foundation
import Ledger
import Logging
import PostgresNIO
import Reconciliation
import SignedData
import TestSupport
import Testing

/// The ledger as a backend reads it (migration 0006): the facts a business queries, in columns,
/// and `app_store.entitlements`, who has access now.
@Suite("The ledger for a backend: queryable columns and entitlements")
struct BackendLedgerTests {
    static let transactionFacts = [
        "app_account_token", "in_app_ownership_type", "subscription_group_identifier", "web_order_line_item_id", "quantity", "price", "currency",
        "storefront", "offer_type", "offer_identifier", "transaction_reason", "revocation_type", "revocation_percentage", "app_transaction_id",
        "original_purchase_date", "offer_discount_type", "offer_period", "storefront_id", "previous_original_transaction_id",
    ]
    static let subscriptionFacts = [
        "app_account_token", "subscription_group_identifier", "in_app_ownership_type", "expiration_intent", "price_increase_status", "renewal_price",
        "currency", "offer_type", "offer_identifier",
        "renewal_date", "offer_discount_type", "offer_period", "app_transaction_id", "eligible_win_back_offer_ids", "previous_original_transaction_id",
    ]

    /// Each row's key and these columns, as text, in key order.
    static func rows(_ client: PostgresClient, table: String, key: String, columns: [String]) async throws -> [String] {
        let list = columns.map { "coalesce(\($0)::text, '∅')" }.joined(separator: " || '|' || ")
        let rows = try await client.query(
            PostgresQuery(unsafeSQL: "SELECT \(key) || ': ' || \(list) FROM app_store.\(table) ORDER BY \(key)"), logger: TestDatabase.logger
        )
        var found: [String] = []
        for try await row in rows.decode(String.self) { found.append(row) }
        return found
    }

    static func count(_ client: PostgresClient, _ sql: String) async throws -> Int {
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql), logger: TestDatabase.logger)
        for try await value in rows.decode(Int.self) { return value }
        return 0
    }

    /// A ledger created by migrations 0001–0005 and filled by the version before 0006 (the rows
    /// a live server recorded, copied column by column into the old tables), then migrated:
    /// the new columns hold what the current code writes for the same payloads.
    @Test func aLedgerFilledBeforeTheNewColumnsGetsThemFromItsStoredPayloads() async throws {
        let harness = try RecoveryHarness(customers: 120, seed: 61)
        let logger = TestDatabase.logger
        try await TestDatabase.withFreshLedger { current, _ in
            try await harness.seedDeliveredNotifications(LedgerStore(client: current, logger: logger))
            let older = try await TestDatabase.freshDatabase()
            try await LedgerDatabase.withClient(older, logger: logger) { old in
                _ = try await Migrator(migrations: Migration.bundled.filter { $0.version <= 5 }).migrate(old, logger: logger)
                for table in ["notifications", "transactions", "subscriptions"] {
                    let json = try await current.query(
                        PostgresQuery(unsafeSQL: "SELECT coalesce(json_agg(t), '[]')::text FROM app_store.\(table) t"), logger: logger
                    )
                    var text = "[]"
                    for try await value in json.decode(String.self) { text = value }
                    // json_populate_recordset keeps the old table's columns and drops the rest.
                    try await old.query(
                        "INSERT INTO app_store.\(unescaped: table) SELECT * FROM json_populate_recordset(NULL::app_store.\(unescaped: table), \(text)::json)",
                        logger: logger
                    )
                }
                #expect(try await Self.count(old, "SELECT count(*) FROM information_schema.columns WHERE table_name = 'transactions' AND column_name = 'price'") == 0)
                let outcome = try await Migrator().migrate(old, logger: logger)
                #expect(outcome.applied.contains { $0.hasPrefix("0006") })

                let transactions = try await Self.rows(current, table: "transactions", key: "transaction_id", columns: Self.transactionFacts)
                #expect(try await Self.rows(old, table: "transactions", key: "transaction_id", columns: Self.transactionFacts) == transactions)
                let subscriptions = try await Self.rows(current, table: "subscriptions", key: "original_transaction_id", columns: Self.subscriptionFacts)
                let backfilled = try await Self.rows(old, table: "subscriptions", key: "original_transaction_id", columns: Self.subscriptionFacts)
                #expect(backfilled == subscriptions, "\(zip(backfilled, subscriptions).filter { $0 != $1 }.prefix(3))")
            }
            // The columns hold real values, not a comparison of NULLs.
            #expect(try await Self.count(current, "SELECT count(*) FROM app_store.transactions WHERE app_account_token IS NOT NULL AND price = 4990") > 10)
            #expect(try await Self.count(current, "SELECT count(*) FROM app_store.transactions WHERE in_app_ownership_type = 'FAMILY_SHARED'") > 0)
            #expect(try await Self.count(current, "SELECT count(*) FROM app_store.transactions WHERE revocation_type IS NOT NULL") > 0)
            #expect(try await Self.count(current, "SELECT count(*) FROM app_store.subscriptions WHERE renewal_price = 4990 AND currency = 'USD'") > 10)
            #expect(try await Self.count(current, "SELECT count(*) FROM app_store.subscriptions WHERE expiration_intent IS NOT NULL") > 0)
            try await Self.expectQueriedFieldsHeld(current)
        }
    }

    /// Migration 0023's columns hold real values (not a comparison of NULLs).
    static func expectQueriedFieldsHeld(_ client: PostgresClient) async throws {
        #expect(try await count(client, "SELECT count(*) FROM app_store.transactions WHERE original_purchase_date <= purchase_date AND storefront_id = '143441'") > 10)
        #expect(try await count(client, "SELECT count(*) FROM app_store.transactions WHERE offer_discount_type = 'FREE_TRIAL' AND offer_period = 'P1W'") > 0)
        #expect(try await count(client, "SELECT count(*) FROM app_store.transactions WHERE previous_original_transaction_id IS NOT NULL") > 0)
        #expect(try await count(client, "SELECT count(*) FROM app_store.subscriptions WHERE renewal_date IS NOT NULL AND app_transaction_id IS NOT NULL") > 10)
        #expect(try await count(client, "SELECT count(*) FROM app_store.subscriptions WHERE cardinality(eligible_win_back_offer_ids) = 2") > 0)
        #expect(try await count(client, "SELECT count(*) FROM app_store.subscriptions WHERE previous_original_transaction_id IS NOT NULL") > 0)
    }

    /// Issue 48, point 7: rows written before migration 0023 (its columns NULL) get them from
    /// their stored JWS when `migrate` runs: the same values every writer writes, the renewal
    /// columns from the renewal info the row's renewal fields came from. Those values, and the
    /// subscription a migrated one continues, are Apple's (the simulator's truth).
    @Test func rowsWrittenBeforeMigration0023GetItsColumnsFromTheirStoredJWSAsWritersWriteThem() async throws {
        let harness = try RecoveryHarness(customers: 80, seed: 62)
        let logger = TestDatabase.logger
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: logger)
            try await harness.seedDeliveredNotifications(store)
            let written = (
                transactions: try await Self.rows(client, table: "transactions", key: "transaction_id", columns: Self.transactionFacts),
                subscriptions: try await Self.rows(client, table: "subscriptions", key: "original_transaction_id", columns: Self.subscriptionFacts)
            )
            try await Self.expectQueriedFieldsHeld(client)
            let migrated = harness.scenario.customers.flatMap(\.subscriptions).filter { $0.latestTransaction.previousOriginalTransactionId != nil }
            #expect(!migrated.isEmpty)
            // Those whose notifications arrived (the outage's are not seeded here).
            let rows = try await store.subscriptions(migrated.map(\.originalTransactionId), pair: harness.pair)
            #expect(!rows.isEmpty)
            for subscription in migrated {
                guard let row = rows[subscription.originalTransactionId] else { continue }
                #expect(row.previousOriginalTransactionId == subscription.latestTransaction.previousOriginalTransactionId)
            }

            try await client.query(
                """
                UPDATE app_store.transaction_rows SET original_purchase_date = NULL, offer_discount_type = NULL, offer_period = NULL,
                    storefront_id = NULL, previous_original_transaction_id = NULL
                """, logger: logger)
            try await client.query(
                """
                UPDATE app_store.subscriptions SET renewal_date = NULL, offer_discount_type = NULL, offer_period = NULL, app_transaction_id = NULL,
                    eligible_win_back_offer_ids = NULL, previous_original_transaction_id = NULL
                """, logger: logger)
            #expect(try await Self.count(client, "SELECT count(*) FROM app_store.subscriptions WHERE renewal_date IS NOT NULL") == 0)
            try await client.query(
                "UPDATE app_store.signed_object_conversion SET after = NULL, finished_at = NULL WHERE table_name LIKE '%0023'", logger: logger)
            let outcome = try await Migrator().migrate(client, logger: logger)
            #expect(outcome.applied.isEmpty)
            #expect(outcome.conversion.batches > 0)
            let transactions = try await Self.rows(client, table: "transactions", key: "transaction_id", columns: Self.transactionFacts)
            let subscriptions = try await Self.rows(client, table: "subscriptions", key: "original_transaction_id", columns: Self.subscriptionFacts)
            #expect(transactions == written.transactions, "\(zip(transactions, written.transactions).filter { $0 != $1 }.prefix(3))")
            #expect(subscriptions == written.subscriptions, "\(zip(subscriptions, written.subscriptions).filter { $0 != $1 }.prefix(3))")
        }
    }

    /// What the simulator says grants access now: auto-renewable subscriptions active (and not
    /// past their expiry) or in their billing grace period, non-consumables not revoked.
    static func accessNow(_ scenario: Scenario, now: Date) -> Set<String> {
        let nowMs = Int64(now.timeIntervalSince1970 * 1000)
        var ids: Set<String> = []
        for purchase in scenario.customers.flatMap(\.purchases) {
            let transaction = purchase.latestTransaction
            switch transaction.type {
            case .autoRenewable:
                switch purchase.subscriptionStatus {
                case .active where (transaction.expiresDate ?? .max) > nowMs: ids.insert(purchase.originalTransactionId)
                case .billingGracePeriod where (purchase.renewalInfo?.gracePeriodExpiresDate ?? .max) > nowMs: ids.insert(purchase.originalTransactionId)
                default: break
                }
            case .nonConsumable:
                if transaction.revocationDate == nil { ids.insert(purchase.originalTransactionId) }
            default: break
            }
        }
        return ids
    }

    @Test func entitlementsAfterARunAreWhoTheSimulatorSaysHasAccessNow() async throws {
        let harness = try RecoveryHarness(customers: 240, seed: 62, outageHours: 48)
        let purchases = harness.scenario.customers.flatMap(\.purchases)
        let statuses = Set(purchases.compactMap(\.subscriptionStatus))
        #expect(statuses.isSuperset(of: [.active, .expired, .billingRetry, .billingGracePeriod, .revoked]), "\(statuses)")
        #expect(purchases.contains { $0.latestTransaction.type == .nonConsumable && $0.latestTransaction.revocationDate != nil }, "a refunded non-consumable")
        #expect(purchases.contains { $0.latestTransaction.inAppOwnershipType == "FAMILY_SHARED" }, "a family-shared purchase")
        // A non-consumable restored on another device (a second transaction of the purchase, which
        // Get Transaction History signs at the same instant as the first), then refunded: it grants nothing.
        let restoredThenRefunded = harness.scenario.customers.filter { account in
            account.purchases.contains { purchase in
                purchase.latestTransaction.type == .nonConsumable && purchase.latestTransaction.revocationDate != nil
                    && Set(account.transactionVersions.filter { $0.transaction.originalTransactionId == purchase.originalTransactionId }.map(\.transaction.transactionId)).count > 1
            }
        }
        #expect(!restoredThenRefunded.isEmpty, "a restored, then refunded non-consumable")
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                _ = try await RepairTests.bothPasses(harness, store, url, try harness.client(baseURL))
                let rows = try await client.query(
                    """
                    SELECT original_transaction_id, environment, product_type, app_account_token, in_app_ownership_type, subscription_group_identifier
                    FROM app_store.entitlements
                    """,
                    logger: harness.logger
                )
                var granted: [String: (String?, String?, UUID?, String?, String?)] = [:]
                var duplicates = 0
                for try await row in rows.decode((String, String?, String?, UUID?, String?, String?).self) {
                    if granted[row.0] != nil { duplicates += 1 }
                    granted[row.0] = (row.1, row.2, row.3, row.4, row.5)
                }
                #expect(duplicates == 0, "one row per purchase")
                let expected = Self.accessNow(harness.scenario, now: Date())
                #expect(!expected.isEmpty)
                #expect(Set(granted.keys) == expected, "granted but should not: \(Set(granted.keys).subtracting(expected).sorted().prefix(5)); missing: \(expected.subtracting(granted.keys).sorted().prefix(5))")
                // Each row carries what a backend looks a purchase up by, as Apple signed it.
                for purchase in purchases {
                    guard let row = granted[purchase.originalTransactionId] else { continue }
                    let transaction = purchase.latestTransaction
                    #expect(row.0 == harness.scenario.configuration.environment.rawValue)
                    #expect(row.1 == transaction.type?.rawValue)
                    #expect(row.2 == transaction.appAccountToken.flatMap(UUID.init(uuidString:)), "\(purchase.originalTransactionId)")
                    #expect(row.3 == transaction.inAppOwnershipType)
                    #expect(row.4 == transaction.subscriptionGroupIdentifier)
                }
                #expect(granted.values.contains { $0.2 != nil } && granted.values.contains { $0.3 == "FAMILY_SHARED" })
            }
        }
    }
}
