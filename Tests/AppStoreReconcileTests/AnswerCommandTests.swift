import AppStoreSimulator
import Foundation
import Ledger
import PostgresNIO
import SignedData
import TestSupport
import ThrowawayPostgres
import Testing

/// `consumption-requests --answer` as the binary users deploy runs it, from a configuration file
/// whose app names a facts file (issue 50).
@Suite("consumption-requests --answer on the command line")
struct AnswerCommandTests {
    @Test func aFactsFileThatDoesNotParseIsExit78WithNothingSentAndOnceFixedTheRequestIsAnsweredAndReported() async throws {
        let harness = try RecoveryHarness(customers: 20, seed: 511, outageHours: 10)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("answer-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let files = try SimulatorFiles.write(for: harness.api, in: scratch.path)
        let candidates = harness.scenario.customers.compactMap { customer in
            customer.purchases.first { $0.latestTransaction.inAppOwnershipType != "FAMILY_SHARED" }?.latestTransaction.transactionId
        }
        let transaction = try #require(candidates.first)
        try harness.api.requestRefund(transactionId: transaction, at: Date().addingTimeInterval(-3600), repeats: 1)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                try await client.query("CREATE TABLE public.usage (transaction_id text PRIMARY KEY, consented boolean, used_percent integer)", logger: harness.logger)
                try await client.query("INSERT INTO public.usage VALUES (\(transaction), true, 10)", logger: harness.logger)
                let facts = scratch.path + "/refund-facts.sql"
                let file = scratch.path + "/appstore.yaml"
                try (DeploymentTests.configuration([(harness, files, baseURL)], database: url.connectionString) + "    refundRequests:\n      facts: \(facts)\n")
                    .write(toFile: file, atomically: true, encoding: .utf8)
                let arguments = ["consumption-requests", "--config", file, "--answer", "--first-lookback-hours", "3", "--settle-minutes", "0", "--no-progress"]

                try "SELEC true AS customer_consented FROM public.usage WHERE transaction_id = $1".write(toFile: facts, atomically: true, encoding: .utf8)
                let broken = try await BuiltBinary.run(arguments + ["--report-dir", scratch.path + "/broken"])
                #expect(broken.exitCode == 78, "\(broken.combined)")
                #expect(broken.standardError.contains(facts) && broken.standardError.contains("syntax error"), "names the file and the server's word: \(broken.standardError)")
                #expect(harness.api.consumptionAnswers.isEmpty)
                var recorded = 0
                for try await count in try await client.query("SELECT count(*)::integer FROM app_store.notifications", logger: harness.logger).decode(Int32.self) { recorded = Int(count) }
                #expect(recorded == 0, "nothing recorded either")

                try """
                    -- Our usage table, mapped to the facts Apple asks for.
                    SELECT u.consented AS customer_consented, 'DELIVERED' AS delivery_status, false AS sample_content_provided,
                        CASE WHEN t.product_type = 'Auto-Renewable Subscription' THEN NULL ELSE u.used_percent * 1000 END AS consumption_percentage,
                        NULL::text AS refund_preference
                    FROM public.usage u
                    LEFT JOIN app_store.transactions t ON t.transaction_id = u.transaction_id AND t.bundle_id = $5 AND t.environment = $6
                    WHERE u.transaction_id = $1;
                    """.write(toFile: facts, atomically: true, encoding: .utf8)
                let fixed = try await BuiltBinary.run(arguments + ["--report-dir", scratch.path + "/fixed"])
                #expect(fixed.exitCode == 0, "\(fixed.combined)")
                #expect(fixed.standardOutput.contains("refund requests: 1 sent"), "\(fixed.standardOutput)")
                #expect(harness.api.consumptionAnswers.map(\.transactionId) == [transaction], "one answer for the request and its repeat")
                let json = try JSONSerialization.jsonObject(with: Data(contentsOf: scratch.appendingPathComponent("fixed/report.json"))) as? [String: Any]
                let answers = try #require(json?["answers"] as? [[String: Any]])
                #expect(answers.count == 1)
                #expect(answers.first?["transactionId"] as? String == transaction && answers.first?["outcome"] as? String == "sent")
                #expect(answers.first?["deadline"] is String)
                let markdown = try String(contentsOfFile: scratch.path + "/fixed/report.md", encoding: .utf8)
                #expect(markdown.contains("## Refund requests answered with Send Consumption Information (1)"))

                let again = try await BuiltBinary.run(arguments + ["--report-dir", scratch.path + "/again"])
                #expect(again.exitCode == 0, "\(again.combined)")
                #expect(again.standardOutput.contains("refund requests: no open refund request"), "\(again.standardOutput)")
                #expect(harness.api.consumptionAnswers.count == 1, "a second --answer sends nothing")
            }
        }
    }
}

extension AnswerCommandTests {
    /// Two apps, the second's facts file broken: the check stops before either records or sends
    /// anything (exit 78), not after the first app's answers went out.
    @Test func oneAppsBrokenFactsFileStopsEveryAppBeforeAnythingIsSent() async throws {
        let one = try RecoveryHarness(customers: 20, seed: 512, outageHours: 10) { $0.bundleId = "com.example.one" }
        let two = try RecoveryHarness(customers: 20, seed: 513, outageHours: 10) { $0.bundleId = "com.example.two" }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("answer-two-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let oneFiles = try SimulatorFiles.write(for: one.api, in: scratch.path + "/one")
        let twoFiles = try SimulatorFiles.write(for: two.api, in: scratch.path + "/two")
        let transaction = try #require(one.scenario.customers.first?.latestTransaction.transactionId)
        try one.api.requestRefund(transactionId: transaction, at: Date().addingTimeInterval(-3600))
        try await SimulatorServer.withRunning(one.api) { oneURL in
            try await SimulatorServer.withRunning(two.api) { twoURL in
                try await TestDatabase.withFreshLedger { client, url in
                    let good = scratch.path + "/good.sql"
                    let broken = scratch.path + "/broken.sql"
                    try "SELECT true AS customer_consented, 'DELIVERED' AS delivery_status, false AS sample_content_provided, NULL::integer AS consumption_percentage, NULL::text AS refund_preference"
                        .write(toFile: good, atomically: true, encoding: .utf8)
                    try "SELECT true AS customer_consented FROM nowhere".write(toFile: broken, atomically: true, encoding: .utf8)
                    // Each app's block, then its facts file.
                    let text = DeploymentTests.configuration([(one, oneFiles, oneURL), (two, twoFiles, twoURL)], database: url.connectionString)
                        .replacingOccurrences(of: "  - bundleId: com.example.two", with: "    refundRequests:\n      facts: \(good)\n  - bundleId: com.example.two")
                        + "    refundRequests:\n      facts: \(broken)\n"
                    let file = scratch.path + "/appstore.yaml"
                    try text.write(toFile: file, atomically: true, encoding: .utf8)
                    let result = try await BuiltBinary.run(
                        ["consumption-requests", "--config", file, "--answer", "--first-lookback-hours", "3", "--settle-minutes", "0", "--no-progress", "--report-dir", scratch.path + "/r"]
                    )
                    #expect(result.exitCode == 78, "\(result.combined)")
                    #expect(result.standardError.contains(broken), "\(result.standardError)")
                    #expect(one.api.consumptionAnswers.isEmpty, "the first app's answer was not sent either")
                    var recorded = 0
                    for try await count in try await client.query("SELECT count(*)::integer FROM app_store.notifications", logger: one.logger).decode(Int32.self) { recorded = Int(count) }
                    #expect(recorded == 0)
                }
            }
        }
    }
}
