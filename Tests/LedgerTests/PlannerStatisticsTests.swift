import Foundation
@testable import Ledger
import PostgresNIO
import SignedData
import TestSupport
import Testing

@Suite("Planner statistics after a large pass 1")
struct PlannerStatisticsTests {
    @Test func staleIsAutovacuumsRuleAppliedAtOnce() {
        // Never analyzed (reltuples −1): more than 50 rows written.
        #expect(!PlannerStatistics(written: 50, estimatedRows: -1).areStale)
        #expect(PlannerStatistics(written: 51, estimatedRows: -1).areStale)
        // A tenth of the table, plus 50.
        #expect(!PlannerStatistics(written: 10_050, estimatedRows: 100_000).areStale)
        #expect(PlannerStatistics(written: 10_051, estimatedRows: 100_000).areStale)
        #expect(!PlannerStatistics(written: 0, estimatedRows: 0).areStale)
    }

    /// 20,000 transaction rows of 6,667 accounts written into a ledger PostgreSQL has not analyzed
    /// yet: after the refresh, pass 2's read of an account (its shape: the App Store's two columns
    /// and `original_transaction_id = ANY(…)`) goes through the customer index, not a walk of the
    /// primary key over every row of the App Store; the refresh runs once, not after a small pass.
    @Test func afterALargePassOneAnAccountsReadUsesTheCustomerIndex() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let logger = TestDatabase.logger
            try await client.query("ALTER TABLE app_store.transaction_rows SET (autovacuum_enabled = false)", logger: logger)
            try await client.query(
                """
                INSERT INTO app_store.transaction_rows (transaction_id, original_transaction_id, purchase_date, signed_date, environment, bundle_id,
                    signed_transaction)
                SELECT 't' || i, 'o' || (i / 3), now() - i * interval '1 minute', now(), 'Sandbox', 'com.example.ledger', 'x.y.z'
                FROM generate_series(1, 20000) i
                """,
                logger: logger)
            let store = LedgerStore(client: client, logger: logger)
            let read = """
                EXPLAIN (FORMAT JSON) SELECT transaction_id FROM app_store.transactions
                WHERE bundle_id = 'com.example.ledger' AND environment = 'Sandbox' AND original_transaction_id = ANY('{o5}'::text[])
                ORDER BY purchase_date, transaction_id
                """
            let before = try await client.query(PostgresQuery(unsafeSQL: read), logger: logger).collect().first?.decode(String.self) ?? ""
            // Without statistics, PostgreSQL 15 takes the primary key's two equal columns for the
            // more selective: what made pass 2 read every row of the App Store per account.
            #expect(!before.contains("transactions_customer_idx"), "the plan before the refresh: \(before)")

            #expect(await store.refreshPlannerStatistics(written: 20_000))
            let after = try await client.query(PostgresQuery(unsafeSQL: read), logger: logger).collect().first?.decode(String.self) ?? ""
            #expect(after.contains("transactions_customer_idx"), "\(after)")
            #expect(!after.contains("transactions_pkey"))
            let analyzed = try await client.query(
                "SELECT count(*) FROM pg_stat_user_tables WHERE schemaname = 'app_store' AND relname = 'transaction_rows' AND last_analyze IS NOT NULL",
                logger: logger
            ).collect().first?.decode(Int.self)
            #expect(analyzed == 1)
            #expect(await !store.refreshPlannerStatistics(written: 500), "500 more rows into 20,000 analyzed ones: not stale")
            let rows = try await store.rows(of: ["o5"], pair: AppStorePair(bundleId: "com.example.ledger", environment: .sandbox))
            #expect(rows.transactions.map(\.transactionId).sorted() == ["t15", "t16", "t17"])
        }
    }
}
