import Foundation
@testable import Ledger
import PostgresNIO
import SignedData
import TestSupport
import Testing

/// The team's facts query, checked and run against a real PostgreSQL: read only, under a
/// timeout, its columns and types by the contract.
@Suite struct RefundFactsQueryTests {
    static let pair = AppStorePair(bundleId: "com.example.refunds", environment: .sandbox)

    /// A team's own table of usage, and the query that maps it to the contract's columns.
    static let facts = """
        SELECT u.consented AS customer_consented,
               CASE WHEN u.delivered THEN 'DELIVERED' ELSE 'UNDELIVERED_OTHER' END AS delivery_status,
               false AS sample_content_provided,
               u.used_milli AS consumption_percentage,
               NULL::text AS refund_preference
        FROM team.usage u
        WHERE u.transaction_id = $1 AND u.bundle_id = $5 AND u.environment = $6 AND ($3::uuid IS NULL OR u.account = $3);
        """

    static func withTeamTable(_ body: @escaping @Sendable (LedgerStore, PostgresClient) async throws -> Void) async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            try await client.query("CREATE SCHEMA team", logger: TestDatabase.logger)
            try await client.query("CREATE SEQUENCE team.reads", logger: TestDatabase.logger)
            try await client.query(
                "CREATE TABLE team.usage (transaction_id text, bundle_id text, environment text, account uuid, consented boolean, delivered boolean, used_milli integer)",
                logger: TestDatabase.logger
            )
            try await client.query(
                "INSERT INTO team.usage VALUES ('2001', 'com.example.refunds', 'Sandbox', NULL, true, true, 40000), ('2002', 'com.example.refunds', 'Sandbox', NULL, false, false, 0)",
                logger: TestDatabase.logger
            )
            try await body(LedgerStore(client: client, logger: TestDatabase.logger), client)
        }
    }

    func run(_ store: LedgerStore, _ query: RefundFactsQuery, _ transaction: String, timeout: Duration = .seconds(5)) async throws -> [ConsumptionFacts] {
        try await store.refundFacts(query, transactionId: transaction, originalTransactionId: "1000", appAccountToken: nil, productId: "coins", pair: Self.pair, timeout: timeout)
    }

    @Test func aGoodQueryChecksAndGivesEachRequestsFacts() async throws {
        try await Self.withTeamTable { store, _ in
            let query = try RefundFactsQuery(file: "/etc/facts.sql", text: Self.facts)
            try await store.check(query, pair: Self.pair)
            let facts = try await self.run(store, query, "2001")
            #expect(facts == [ConsumptionFacts(customerConsented: true, deliveryStatus: "DELIVERED", sampleContentProvided: false, consumptionPercentage: 40_000, refundPreference: nil)])
            #expect(try await self.run(store, query, "2002").first?.customerConsented == false)
            #expect(try await self.run(store, query, "9999").isEmpty)
        }
    }

    @Test(arguments: [
        ("SELEC true", "does not run"),
        ("SELECT true AS customer_consented, 'DELIVERED' AS delivery_status, false AS sample_content_provided, NULL::integer AS consumption_percentage", "refund_preference"),
        ("SELECT true AS customer_consented, 'DELIVERED' AS delivery_status, false AS sample_content_provided, '5'::text AS consumption_percentage, NULL::text AS refund_preference", "consumption_percentage"),
    ])
    func aQueryThatDoesNotParseOrBreaksTheContractIsRefusedNamingTheFile(text: String, named: String) async throws {
        try await Self.withTeamTable { store, _ in
            let query = try RefundFactsQuery(file: "/etc/facts.sql", text: text)
            do {
                try await store.check(query, pair: Self.pair)
                Issue.record("accepted \(text)")
            } catch let error as RefundFactsError {
                #expect(error.description.contains("/etc/facts.sql"))
                #expect(error.description.contains(named), "\(error)")
            }
        }
    }

    @Test func theQueryRunsReadOnlyAndWithinItsTimeout() async throws {
        try await Self.withTeamTable { store, client in
            let writes = try RefundFactsQuery(
                file: "/etc/facts.sql",
                text: "SELECT true AS customer_consented, 'DELIVERED' AS delivery_status, false AS sample_content_provided, NULL::integer AS consumption_percentage, NULL::text AS refund_preference WHERE nextval('team.reads') > 0"
            )
            do {
                _ = try await self.run(store, writes, "2001")
                Issue.record("a query that writes ran")
            } catch let error as RefundFactsError {
                #expect(error.description.contains("read-only"), "\(error)")
            }
            let slow = try RefundFactsQuery(
                file: "/etc/facts.sql",
                text: "SELECT true AS customer_consented, 'DELIVERED' AS delivery_status, false AS sample_content_provided, NULL::integer AS consumption_percentage, NULL::text AS refund_preference FROM pg_sleep(5)"
            )
            do {
                _ = try await self.run(store, slow, "2001", timeout: .milliseconds(200))
                Issue.record("a query past its timeout answered")
            } catch let error as RefundFactsError {
                #expect(error.description.contains("timeout"), "\(error)")
            }
        }
    }

    @Test func oneStatementOnly() {
        #expect(throws: RefundFactsError.self) { try RefundFactsQuery(file: "f", text: "SELECT 1; DROP TABLE team.usage") }
        #expect(throws: RefundFactsError.self) { try RefundFactsQuery(file: "f", text: " ;\n") }
        #expect((try? RefundFactsQuery(file: "f", text: "SELECT ';' AS x -- a; comment\n;\n"))?.sql == "SELECT ';' AS x -- a; comment")
    }

    /// The worked example of docs/production.md, step 8, as printed: its table, then its query,
    /// checked and run (a guide whose query did not run would send teams astray).
    @Test func theProductionGuidesWorkedExampleChecksAndGivesTheFactsItPromises() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let guide = try String(contentsOf: root.appendingPathComponent("docs/production.md"), encoding: .utf8)
        let blocks = guide.components(separatedBy: "```sql\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        let table = try #require(blocks.first { $0.contains("CREATE TABLE billing.purchase_usage") })
        let text = try #require(blocks.first { $0.contains("AS customer_consented") })
        try await TestDatabase.withFreshLedger { client, _ in
            try await client.query("CREATE SCHEMA billing", logger: TestDatabase.logger)
            try await client.query(PostgresQuery(unsafeSQL: table), logger: TestDatabase.logger)
            try await client.query(
                "INSERT INTO billing.purchase_usage VALUES ('3001', true, true, false, 50, 20, 'abuse'), ('3002', true, false, true, 10, 0, NULL)",
                logger: TestDatabase.logger
            )
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            let query = try RefundFactsQuery(file: "/etc/appstore-reconcile/refund-facts.sql", text: text)
            try await store.check(query, pair: Self.pair)
            #expect(
                try await self.run(store, query, "3001")
                    == [ConsumptionFacts(customerConsented: true, deliveryStatus: "DELIVERED", sampleContentProvided: false, consumptionPercentage: 40_000, refundPreference: "DECLINE")]
            )
            #expect(
                try await self.run(store, query, "3002")
                    == [ConsumptionFacts(customerConsented: true, deliveryStatus: "UNDELIVERED_SERVER_OUTAGE", sampleContentProvided: true, consumptionPercentage: 0, refundPreference: nil)]
            )
            #expect(try await self.run(store, query, "3003").isEmpty)
        }
    }
}
