import AppStoreSimulator
import Foundation
import Ledger
import PostgresNIO
import SignedData
import TestSupport
import Testing
import ThrowawayPostgres

/// Issue 62, point 8: `import` in Production asks the app's Sandbox pair about what Production
/// does not know (App Review and TestFlight purchases are Sandbox purchases of a production app),
/// and reads a receipt's bundle ID and type: another app's receipt, or Xcode's, is a line not
/// imported, named. The built binary (the release build too), the simulator's two environments
/// and a real PostgreSQL.
@Suite("import across environments")
struct ImportAcrossEnvironmentsTests {
    @Test func aTestFlightTransactionIdImportsThroughTheSandboxPairAndAnotherAppsReceiptIsRefusedByName() async throws {
        let world = try DeploymentTests.FourAppStores(customers: 6)
        let production = world.harness("com.example.one", .production)
        let sandbox = world.harness("com.example.one", .sandbox)
        let otherApp = world.harness("com.example.two", .production)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("import-env-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let files = try SimulatorFiles.write(for: production.api, in: scratch.path)
        try await SimulatorServer.withRunning(world.production) { productionHost in
            try await SimulatorServer.withRunning(world.sandbox) { sandboxHost in
                try await TestDatabase.withFreshLedger { client, url in
                    let store = LedgerStore(client: client, logger: production.logger)
                    let file = scratch.path + "/appstore.yaml"
                    try world.configuration(database: url.connectionString, files: files, production: productionHost, sandbox: sandboxHost)
                        .write(toFile: file, atomically: true, encoding: .utf8)
                    let command = ["import", "--config", file, "--app", "com.example.one", "--environment", "Production", "--no-progress"]

                    // A production customer, a TestFlight one (Sandbox), and an ID neither knows.
                    let buyer = production.scenario.customers[0]
                    let tester = sandbox.scenario.customers[1]
                    let ids = try ImportCommandTests.write([buyer.originalTransactionId, tester.originalTransactionId, "1999999999999999"], scratch, "ids.txt")
                    let fromIds = try await BuiltBinary.run(command + ["--transaction-ids", ids, "--report-dir", scratch.path + "/ids"])
                    #expect(fromIds.exitCode == 3, "the unknown ID is a line not imported: \(fromIds.combined)")
                    #expect(try await production.mismatches(store, accounts: [buyer]).isEmpty)
                    #expect(try await sandbox.mismatches(store, accounts: [tester]).isEmpty, "the TestFlight account is in the ledger's Sandbox rows")
                    #expect(sandbox.api.transactionHistoryRequests.contains { $0.id == tester.originalTransactionId })
                    #expect(!sandbox.api.transactionHistoryRequests.contains { $0.id == buyer.originalTransactionId }, "what Production knows is not asked in Sandbox")
                    #expect(fromIds.combined.contains("1 found in Sandbox"), "\(fromIds.combined)")
                    let json = try ImportCommandTests.reportJSON(scratch.path + "/ids")
                    guard case .object(let imported)? = json["import"], case .array(let problems)? = imported["problems"] else {
                        Issue.record("report.json lacks import.problems")
                        return
                    }
                    #expect(imported["accountsFromSandbox"] == .number(1))
                    #expect(problems.count == 1)
                    #expect("\(problems)".contains("nor in Sandbox"), "\(problems)")

                    // Receipts: Production's, a TestFlight device's (ProductionSandbox), another app's, Xcode's.
                    let xcode = try AppReceiptWriter.base64(
                        bundleId: "com.example.one", receiptType: "Xcode", records: [.init(productId: "p", transactionId: "0", originalTransactionId: "0")])
                    let receipts = try ImportCommandTests.write([
                        try production.api.appReceipt(customer: 2), try sandbox.api.appReceipt(customer: 3), try otherApp.api.appReceipt(customer: 4), xcode,
                    ], scratch, "receipts.txt")
                    let fromReceipts = try await BuiltBinary.run(command + ["--receipts", receipts, "--report-dir", scratch.path + "/receipts"])
                    #expect(fromReceipts.exitCode == 3, "\(fromReceipts.combined)")
                    #expect(try await production.mismatches(store, accounts: [production.scenario.customers[2]]).isEmpty)
                    #expect(try await sandbox.mismatches(store, accounts: [sandbox.scenario.customers[3]]).isEmpty)
                    let receiptProblems = try ImportCommandTests.reportJSON(scratch.path + "/receipts")
                    guard case .object(let fromReceiptsImport)? = receiptProblems["import"], case .array(let lines)? = fromReceiptsImport["problems"] else {
                        Issue.record("report.json lacks import.problems")
                        return
                    }
                    #expect(lines.count == 2)
                    #expect("\(lines)".contains("a receipt of another app (com.example.two)"), "\(lines)")
                    #expect("\(lines)".contains("an Xcode receipt"), "\(lines)")
                    #expect(!otherApp.api.transactionHistoryRequests.contains { _ in true }, "nothing of the other app's receipt was sent")
                    var rows: [String] = []
                    for try await row in try await client.query("SELECT DISTINCT bundle_id || ' ' || environment FROM app_store.subscriptions ORDER BY 1").decode(String.self) {
                        rows.append(row)
                    }
                    #expect(rows == ["com.example.one Production", "com.example.one Sandbox"])

                    // `customer` in Production finds a TestFlight purchase in Sandbox, and says so.
                    let other = sandbox.scenario.customers[5]
                    let support = ["customer", "--config", file, "--app", "com.example.one", "--environment", "Production"]
                    let shown = try await BuiltBinary.run(support + [other.originalTransactionId, "--repair"])
                    #expect(shown.exitCode == 0, "\(shown.combined)")
                    #expect(shown.standardOutput.contains("found in Sandbox"), "\(shown.standardOutput)")
                    #expect(try await sandbox.mismatches(store, accounts: [other]).isEmpty, "--repair wrote it into the Sandbox rows")
                    let asJSON = try await BuiltBinary.run(support + [other.originalTransactionId, "--json"])
                    #expect(asJSON.exitCode == 0, "\(asJSON.combined)")
                    #expect(asJSON.standardOutput.contains("\"foundInEnvironment\" : \"Sandbox\""), "\(asJSON.standardOutput)")
                    let nowhere = try await BuiltBinary.run(support + ["1999999999999998"])
                    #expect(nowhere.exitCode == 3, "\(nowhere.combined)")
                }
            }
        }
    }
}
