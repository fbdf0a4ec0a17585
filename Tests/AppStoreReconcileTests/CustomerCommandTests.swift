import AppStoreSimulator
import Foundation
import Ledger
import PostgresNIO
import SignedData
import TestSupport
import Testing
import ThrowawayPostgres

/// `customer` run as a support engineer runs it: a difference planted in the ledger is named
/// field by field, `--repair` mends it, a second look agrees; by order ID and by appAccountToken.
@Suite("customer on the command line")
struct CustomerCommandTests {
    @Test func aPlantedDifferenceIsNamedRepairMendsItAndASecondLookAgrees() async throws {
        let token = "5b3c2c1e-8f1a-4f7e-9c55-2d8a6f3e1a01"
        let harness = try RecoveryHarness(customers: 6, seed: 99, environment: .production, outageHours: 20) { configuration in
            configuration.appAccountTokensSet = [1: token, 2: token]
        }
        let customers = harness.scenario.customers
        let subscriber = try #require(customers.first { !$0.subscriptions.isEmpty })
        let subscription = try #require(subscriber.subscriptions.first?.originalTransactionId)
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            let input = try ImportCommandTests.write(customers.map(\.originalTransactionId), scratch, "ids.txt")
            let imported = try await BuiltBinary.run(["import", "--transaction-ids", input, "--no-progress", "--report-dir", scratch.path + "/import"], environment: environment)
            #expect(imported.exitCode == 0, "\(imported.combined)")
            try await client.query("UPDATE app_store.subscriptions SET expires_date = expires_date - interval '3 days' WHERE original_transaction_id = \(subscription)")

            let look = try await BuiltBinary.run(["customer", ImportCommandTests.laterTransaction(subscriber)], environment: environment)
            #expect(look.exitCode == 3, "\(look.combined)")
            let differing = look.standardOutput.split(separator: "\n").filter { $0.contains("← differs") }
            #expect(differing.count == 1 && differing.first?.contains("expiresDate") == true, "\(look.standardOutput)")
            #expect(look.standardOutput.contains("notifications recorded"))
            #expect(look.standardOutput.contains("webhook"), "the notifications the live server recorded are listed")

            let json = try await BuiltBinary.run(["customer", subscription, "--json"], environment: environment)
            #expect(json.exitCode == 3)
            let decoded = try JSONDecoder().decode([String: JSONValue].self, from: Data(json.standardOutput.utf8))
            #expect(decoded["agrees"] == .bool(false))
            guard case .array(let cases)? = decoded["cases"], case .object(let first)? = cases.first, case .array(let fields)? = first["subscriptions"] else {
                Issue.record("customer --json lacks cases[].subscriptions: \(json.standardOutput)")
                return
            }
            let differs = fields.filter { field in
                guard case .object(let values) = field else { return false }
                return values["differs"] == .bool(true)
            }
            #expect(differs.count == 1)
            #expect("\(differs)".contains("expiresDate"))

            let repaired = try await BuiltBinary.run(["customer", subscription, "--repair"], environment: environment)
            #expect(repaired.exitCode == 0, "\(repaired.combined)")
            #expect(repaired.standardOutput.contains("Repaired"))
            // As `repair --transaction-id`: recorded as a repair run (after the import's own).
            #expect(try await ImportCommandTests.count(client, "SELECT count(*) FROM app_store.runs WHERE kind = 'repair' AND outcome = 'succeeded'") == 2)
            #expect(try await harness.mismatches(LedgerStore(client: client, logger: harness.logger)).isEmpty)

            let order = harness.api.orderId(ofTransaction: ImportCommandTests.laterTransaction(subscriber))
            let again = try await BuiltBinary.run(["customer", "--order-id", order], environment: environment)
            #expect(again.exitCode == 0, "\(again.combined)")
            #expect(again.standardOutput.contains("The ledger agrees with Apple."))

            let byToken = try await BuiltBinary.run(["customer", "--app-account-token", token], environment: environment)
            #expect(byToken.exitCode == 0, "\(byToken.combined)")
            #expect(byToken.standardOutput.components(separatedBy: "\nAccount ").count + (byToken.standardOutput.hasPrefix("Account ") ? 0 : -1) == 2, "two accounts carry the token: \(byToken.standardOutput)")
            #expect(byToken.standardOutput.contains(customers[1].originalTransactionId) && byToken.standardOutput.contains(customers[2].originalTransactionId))

            let unknown = try await BuiltBinary.run(["customer", "--app-account-token", UUID().uuidString], environment: environment)
            #expect(unknown.exitCode == 3)
            #expect(unknown.standardError.contains("no purchase in the ledger carries"))
        }
    }
}
