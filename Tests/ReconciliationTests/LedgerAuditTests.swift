import AppStoreSimulator
import Decisions
import Foundation
import Ledger
import LedgerModel
import PostgresNIO
import Reconciliation
import Reports
import RunResults
import SignedData
import TestSupport
import Testing

/// Issue 64, point 2: `audit` compares a random sample of the ledger's accounts with Apple, field
/// by field, states the exact binomial bound of the share that differs, and mends them with
/// `--repair`, against the simulator and a real ledger.
@Suite("An audit of the ledger against Apple, with a bound")
struct LedgerAuditTests {
    @Test func plantedDifferencesAreFoundWithABoundConsistentWithThemAndRepairMendsThem() async throws {
        let harness = try RecoveryHarness(customers: 40, seed: 64, outageHours: 0)
        let pair = harness.pair
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let run = try harness.reconciliation(store, url, client: try harness.client(baseURL))

                // Every account, with --repair: the ledger is made Apple's.
                let first = try #require(try await run.audit(sample: 100_000, repair: true, concurrency: 4).audited)
                #expect(first.wholeLedger && first.repaired && first.unknownToApple.isEmpty && !first.cutShort)
                #expect(try await harness.mismatches(store).isEmpty, "after --repair the ledger equals Apple's truth")

                // A clean ledger: nothing differs, and the bound is 1 − 0.05^(1/n).
                let clean = try await run.audit(sample: 100_000, repair: false, concurrency: 4)
                let cleanAudit = try #require(clean.audited)
                #expect(cleanAudit.differing == 0 && cleanAudit.differences.isEmpty && cleanAudit.sampled >= first.sampled)
                #expect(cleanAudit.sampled >= 30, "accounts compared: \(cleanAudit.sampled)")
                #expect(cleanAudit.upperBound95 == AuditBound.upperBound95(differing: 0, sampled: cleanAudit.sampled))
                #expect(clean.outcome == .succeeded)
                // Its row, whose bound serve's gauge reads; an audit without --repair takes no lock and writes nothing else.
                #expect(try await store.auditBounds(for: [pair])[pair]?.upperBound == cleanAudit.upperBound95)

                // k planted differences among N accounts, and one account Apple does not know.
                let planted = harness.scenario.customers.prefix(6).map(\.originalTransactionId)
                for id in planted.prefix(3) {
                    try await client.query(
                        "UPDATE app_store.subscriptions SET expires_date = expires_date - interval '3 days' WHERE original_transaction_id = \(id) AND expires_date IS NOT NULL"
                    )
                }
                for id in planted.suffix(3) {
                    try await client.query("UPDATE app_store.subscriptions SET product_id = 'planted.product' WHERE original_transaction_id = \(id)")
                }
                try await client.query(
                    """
                    INSERT INTO app_store.subscriptions (bundle_id, environment, original_transaction_id, product_id, status, last_signed_date)
                    VALUES (\(pair.bundleId), \(pair.environment.rawValue), '990000000000001', 'p', 1, now())
                    """
                )
                let found = try #require(try await run.audit(sample: 100_000, repair: false, concurrency: 4).audited)
                let plantedAccounts = Set(planted)
                #expect(Set(found.differingAccounts).isSuperset(of: plantedAccounts) && found.differing == plantedAccounts.count,
                        "the planted accounts and no other: \(found.differingAccounts)")
                #expect(found.unknownToApple.map(\.originalTransactionId) == ["990000000000001"], "reported apart, not differing")
                let fields = Dictionary(grouping: found.differences, by: \.field)
                #expect(Set(fields["expiresDate"]?.compactMap(\.originalTransactionId) ?? []) == Set(planted.prefix(3)))
                #expect(fields["productId"]?.allSatisfy { $0.ledger == "planted.product" && $0.apple != "planted.product" } == true)
                let bound = try #require(found.upperBound95)
                #expect(bound >= Double(found.differing) / Double(found.sampled) && bound == AuditBound.upperBound95(differing: 6, sampled: found.sampled))
                #expect(try await harness.mismatches(store).count >= 6, "an audit without --repair leaves the ledger as it was")

                // A sample smaller than the ledger: what it finds is planted, its bound over what it compared.
                let small = try #require(try await run.audit(sample: 10, repair: false, concurrency: 4).audited)
                #expect(!small.wholeLedger && small.sampled <= 10 && small.sampled >= 5)
                #expect(Set(small.differingAccounts).isSubset(of: plantedAccounts))
                #expect(small.upperBound95 == AuditBound.upperBound95(differing: small.differing, sampled: small.sampled))

                // --repair mends them; the next audit finds nothing.
                let mended = try #require(try await run.audit(sample: 100_000, repair: true, concurrency: 4).audited)
                #expect(mended.differing == 6 && mended.repaired)
                #expect(try await harness.mismatches(store).isEmpty)
                let after = try #require(try await run.audit(sample: 100_000, repair: false, concurrency: 4).audited)
                #expect(after.differing == 0)
            }
        }
    }

    @Test func theNightlyAuditsASampleAfterItsPassesMendsWhatDiffersAndRecordsItsBound() async throws {
        let harness = try RecoveryHarness(customers: 30, seed: 65, outageHours: 0)
        let pair = harness.pair
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let run = try harness.reconciliation(store, url, client: try harness.client(baseURL))
                _ = try await run.audit(sample: 100_000, repair: true, concurrency: 4)
                let planted = harness.scenario.customers.prefix(2).map(\.originalTransactionId)
                for id in planted {
                    try await client.query("UPDATE app_store.subscriptions SET product_id = 'planted.product' WHERE original_transaction_id = \(id)")
                }
                var request = ReconciliationRun.Request(
                    kind: .nightly, window: .nightly(firstStart: Date().addingTimeInterval(-2 * 3600), overlap: 0, settle: 0), mode: .apply)
                request.audit = NightlyAudit(sample: 100_000, maxShareOfRateLimit: 1)
                let result = try await run.execute(request)
                let audit = try #require(result.audited, "the nightly audited")
                #expect(audit.repaired && audit.wholeLedger && audit.differing == 2 && Set(audit.differingAccounts) == Set(planted))
                #expect(result.outcome == .succeeded, "mended: nothing needs a person")
                #expect(try await harness.mismatches(store).isEmpty)
                #expect(try await store.auditBounds(for: [pair])[pair]?.upperBound == audit.upperBound95)
                let report = try RecoveryReport(result)
                #expect(report.summaryLine.contains("audit: ") && report.markdown().contains("## Audit"))

                // A sample of 0 is no audit.
                request.audit = NightlyAudit(sample: 0, maxShareOfRateLimit: 1)
                #expect(try await run.execute(request).audited == nil)
            }
        }
    }
}
