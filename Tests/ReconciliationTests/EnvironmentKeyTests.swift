import AppStoreSimulator
import Foundation
import Ledger
import PostgresNIO
import Reconciliation
import SignedData
import TestSupport
import Testing

@Suite("Production and Sandbox in one ledger")
struct EnvironmentKeyTests {
    /// Production and Sandbox are two App Stores whose IDs may coincide. The same transaction ID
    /// and originalTransactionId arriving from both leave two rows of each table, each as its own
    /// environment wrote it: a version signed later in one environment never overwrites, nor is
    /// kept out by, the other's row (migration 0014 keys the tables by environment).
    @Test func theSameTransactionIdArrivingInSandboxAndProductionLeavesBothRowsAsTheirOwnEnvironmentWroteThem() async throws {
        let sandbox = try RecoveryHarness(customers: 12, seed: 7, environment: .sandbox)
        let production = try RecoveryHarness(customers: 12, seed: 7, environment: .production)
        let base = try #require(sandbox.scenario.notifications.first { $0.renewalInfo?.autoRenewStatus != nil && $0.transaction.type == .autoRenewable })
        let status = try #require(base.renewalInfo?.autoRenewStatus)
        let transactionId = try #require(base.transaction.transactionId)
        let customer = base.originalTransactionId

        @Sendable func version(of notification: Scenario.Notification, in environment: AppStoreEnvironment, after minutes: Int64) -> Scenario.Notification {
            var copy = notification
            copy.uuid = UUID().uuidString.lowercased()
            copy.signedDate = notification.signedDate + minutes * 60_000
            copy.transaction.signedDate = copy.signedDate
            copy.transaction.environment = environment
            copy.renewalInfo?.signedDate = copy.signedDate
            copy.renewalInfo?.environment = environment
            return copy
        }
        // The Production version is signed later and says something else: with keys that ignore
        // the environment it would overwrite the Sandbox rows.
        let inProduction = {
            var changed = version(of: base, in: .production, after: 10)
            changed.transaction.productId = "com.example.production.only"
            changed.renewalInfo?.autoRenewStatus = 1 - status
            return changed
        }()

        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: sandbox.logger)
            let sandboxIngest = NotificationIngest(verifier: try sandbox.verifier(), store: store)
            let productionIngest = NotificationIngest(verifier: try production.verifier(), store: store)
            func rows() async throws -> (sandbox: SubscriptionRecord?, production: SubscriptionRecord?, transactions: [String]) {
                let transactions = try await ChangeFeedTests.lines(
                    client,
                    "SELECT environment || ' ' || coalesce(product_id, '-') FROM app_store.transactions WHERE transaction_id = '\(transactionId)' ORDER BY 1"
                )
                return (
                    try await store.subscriptions([customer], pair: try sandbox.verifier().configuration.pair)[customer],
                    try await store.subscriptions([customer], pair: try production.verifier().configuration.pair)[customer], transactions
                )
            }

            let first = try await sandboxIngest.ingest(signedPayloads: [try sandbox.api.signNotification(version(of: base, in: .sandbox, after: 0))])
            let second = try await productionIngest.ingest(signedPayloads: [try production.api.signNotification(inProduction)])
            #expect(first == 1 && second == 1, "both recorded")
            var now = try await rows()
            #expect(now.sandbox?.productId == base.transaction.productId && now.sandbox?.autoRenewStatus == status)
            #expect(now.production?.productId == "com.example.production.only" && now.production?.autoRenewStatus == 1 - status)
            #expect(now.transactions == ["Production com.example.production.only", "Sandbox \(base.transaction.productId ?? "-")"])

            // A Sandbox version signed later still changes the Sandbox rows alone.
            let productionBefore = now.production
            var laterSandbox = version(of: base, in: .sandbox, after: 20)
            laterSandbox.renewalInfo?.autoRenewStatus = 1 - status
            _ = try await sandboxIngest.ingest(signedPayloads: [try sandbox.api.signNotification(laterSandbox)])
            now = try await rows()
            #expect(now.sandbox?.autoRenewStatus == 1 - status, "the Sandbox row moved")
            #expect(now.production == productionBefore, "the Production row is as Production wrote it")

            // The change feed names each row's own environment.
            let fed = try await ChangeFeedTests.lines(
                client, "SELECT kind || ' ' || environment || ' ' || (after ->> 'environment') FROM app_store.changes ORDER BY id"
            )
            #expect(fed == [
                "transaction Sandbox Sandbox", "subscription Sandbox Sandbox",
                "transaction Production Production", "subscription Production Production",
                "subscription Sandbox Sandbox",
            ], "\(fed)")
        }
    }
}
