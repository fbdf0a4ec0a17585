import AppStoreSimulator
import Foundation
import Ledger
import PostgresNIO
import SignedData
import TestSupport
import Testing
import ThrowawayPostgres

/// `audit` run as an operator runs it: a clean ledger states its bound and exits 0, a planted
/// difference is found (exit 3) and named in report.json and report.html, `--repair` mends it,
/// and a sample of 0 is a usage error.
@Suite("audit on the command line")
struct AuditCommandTests {
    static func audit(_ directory: String) throws -> [String: JSONValue] {
        let report = try JSONDecoder().decode([String: JSONValue].self, from: Data(contentsOf: URL(fileURLWithPath: directory + "/report.json")))
        guard case .object(let audit)? = report["audit"] else { throw AuditMissing(report: "\(report.keys.sorted())") }
        return audit
    }

    struct AuditMissing: Error { var report: String }

    @Test func aCleanLedgerStatesItsBoundAPlantedDifferenceIsFoundAndRepairMendsIt() async throws {
        let harness = try RecoveryHarness(customers: 12, seed: 41, environment: .production, outageHours: 20)
        let customers = harness.scenario.customers
        let subscription = try #require(customers.first { !$0.subscriptions.isEmpty }?.subscriptions.first?.originalTransactionId)
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            let input = try ImportCommandTests.write(customers.map(\.originalTransactionId), scratch, "ids.txt")
            let imported = try await BuiltBinary.run(["import", "--transaction-ids", input, "--no-progress", "--report-dir", scratch.path + "/import"], environment: environment)
            #expect(imported.exitCode == 0, "\(imported.combined)")

            let usage = try await BuiltBinary.run(["audit", "--sample", "0"], environment: environment)
            #expect(usage.exitCode == 64 && usage.standardError.contains("--sample"), "\(usage.combined)")

            let clean = try await BuiltBinary.run(["audit", "--no-progress", "--report-dir", scratch.path + "/clean"], environment: environment)
            #expect(clean.exitCode == 0, "\(clean.combined)")
            #expect(clean.standardOutput.contains("0 differing") && clean.standardOutput.contains("at 95% confidence at most"), "\(clean.standardOutput)")
            let cleanAudit = try Self.audit(scratch.path + "/clean")
            guard case .number(let sampled)? = cleanAudit["sampled"], case .number(let bound)? = cleanAudit["upperBound95"] else {
                Issue.record("audit lacks sampled or upperBound95: \(cleanAudit)")
                return
            }
            #expect(cleanAudit["differing"] == .number(0) && cleanAudit["wholeLedger"] == .bool(true) && sampled >= 10)
            #expect(abs(bound - (1 - pow(0.05, 1 / sampled))) < 1e-9)

            try await client.query("UPDATE app_store.subscriptions SET expires_date = expires_date - interval '3 days' WHERE original_transaction_id = \(subscription)")
            let found = try await BuiltBinary.run(["audit", "--sample", "1000", "--no-progress", "--report-dir", scratch.path + "/found"], environment: environment)
            #expect(found.exitCode == 3, "differences not repaired need a person: \(found.combined)")
            #expect(found.standardOutput.hasPrefix("Done: ") && found.standardError.contains("1 account(s) differ from Apple, not repaired"), "\(found.combined)")
            let foundAudit = try Self.audit(scratch.path + "/found")
            #expect(foundAudit["differing"] == .number(1) && foundAudit["repaired"] == .bool(false))
            #expect("\(foundAudit["differences"] ?? .null)".contains("expiresDate"), "\(foundAudit)")
            let html = try String(contentsOfFile: scratch.path + "/found/report.html", encoding: .utf8)
            #expect(html.contains("id=\"audit\"") && html.contains("expiresDate") && html.contains("differ from Apple and were not repaired"))
            #expect(try await ImportCommandTests.count(client, "SELECT count(*) FROM app_store.runs WHERE kind = 'audit' AND finished_at IS NOT NULL") == 2)

            let mended = try await BuiltBinary.run(["audit", "--repair", "--no-progress", "--report-dir", scratch.path + "/mended"], environment: environment)
            #expect(mended.exitCode == 0, "\(mended.combined)")
            #expect(try Self.audit(scratch.path + "/mended")["repaired"] == .bool(true))
            #expect(try await harness.mismatches(LedgerStore(client: client, logger: harness.logger)).isEmpty)
            let again = try await BuiltBinary.run(["audit", "--no-progress", "--report-dir", scratch.path + "/again"], environment: environment)
            #expect(again.exitCode == 0 && again.standardOutput.contains("0 differing"), "\(again.combined)")
        }
    }
}
