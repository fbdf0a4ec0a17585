import AppStoreServerAPI
import AppStoreSimulator
import Foundation
import Ledger
import PostgresNIO
import Reconciliation
import SignedData
import TestSupport
import Testing

@Suite("Pass 2 end to end: customers only Get Transaction History can set right")
struct RepairTests {
    /// A world where three kinds of truth never reached the server as notifications: a refund
    /// after the outage's snapshot, a renewal no history holds, an expiry never notified.
    static func silencedHarness() throws -> (harness: RecoveryHarness, refund: String, renewal: String, expiry: String) {
        let probe = try RecoveryHarness(customers: 200, seed: 41, outageHours: 96)
        let hidden = probe.scenario.notificationsOnlyTransactionHistoryReveals()
        let refund = try #require(hidden.refund)
        let renewal = try #require(hidden.renewal)
        let expiry = try #require(hidden.expiry)
        let harness = try RecoveryHarness(customers: 200, seed: 41, outageHours: 96, silenced: [refund.uuid, renewal.uuid, expiry.uuid])
        return (harness, refund.originalTransactionId, renewal.originalTransactionId, expiry.originalTransactionId)
    }

    @Test func afterBothPassesEveryRowEqualsApplesTruthAndCustomersWithoutAGapCostNoRequest() async throws {
        let (harness, refund, renewal, expiry) = try Self.silencedHarness()
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, _ in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let window = try harness.window()
                let apiClient = try harness.client(baseURL)
                var report = try await NotificationRecovery(client: apiClient, verifier: try harness.verifier(), store: store, logger: harness.logger).run(.init(window: window))
                let before = try await harness.mismatches(store)
                #expect(!before.isEmpty, "pass 1 alone cannot set these customers right")
                report.add(repairs: try await harness.repair(baseURL, store, client: apiClient).afterRecovery(report, window: window, dryRun: false))

                let problems = try await harness.mismatches(store)
                #expect(problems.isEmpty, "\(problems.prefix(10))")
                let repairs = Dictionary(uniqueKeysWithValues: report.repairs.map { ($0.originalTransactionId, $0) })
                #expect(repairs[refund]?.refundsFound.isEmpty == false, "the refund is found, and highlighted")
                #expect(repairs[renewal]?.reasons.contains("transaction-chain-gap") == true)
                #expect(repairs[renewal]?.transactionsAdded.count == 1)
                #expect(repairs[expiry]?.reasons.contains("active-but-expired") == true)
                #expect(repairs[expiry]?.changes.contains { $0.field == "status" && $0.before == "1" && $0.after == "2" } == true)
                #expect(report.counts.customersRepaired >= 3)

                // Customers without a gap: no recovered notification, no rule hit, no request.
                let selected = Set(report.repairs.map(\.originalTransactionId))
                let requested = Set(harness.api.transactionHistoryRequests.map(\.id))
                #expect(requested == selected)
                #expect(selected.count < harness.scenario.customers.count, "some customers had nothing to repair")
                let untouched = harness.scenario.customers.map(\.originalTransactionId).filter { !selected.contains($0) }
                #expect(!untouched.isEmpty && untouched.allSatisfy { !requested.contains($0) })
            }
        }
    }

    @Test func aSecondRunAsksEachRepairedCustomerOnceFromTheStoredRevisionAndChangesNothing() async throws {
        let (harness, _, _, _) = try Self.silencedHarness()
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, _ in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let window = try harness.window()
                let apiClient = try harness.client(baseURL)
                let recovery = NotificationRecovery(client: apiClient, verifier: try harness.verifier(), store: store, logger: harness.logger)
                let repair = try harness.repair(baseURL, store, client: apiClient)
                let first = try await repair.afterRecovery(try await recovery.run(.init(window: window)), window: window, dryRun: false)
                let dumpAfterFirst = try await RecoveryHarness.dump(client)
                let requestsBefore = harness.api.transactionHistoryRequests.count

                let second = try await repair.afterRecovery(try await recovery.run(.init(window: window)), window: window, dryRun: false)
                let secondRequests = Array(harness.api.transactionHistoryRequests.dropFirst(requestsBefore))
                // The second run selects again every customer whose notifications were recovered in
                // the window; one selected only because its record contradicted itself is, once
                // repaired, no longer selected: the repair resolved the contradiction.
                let firstIds = Set(first.map(\.originalTransactionId))
                let secondIds = Set(second.map(\.originalTransactionId))
                #expect(secondIds.isSubset(of: firstIds))
                let dropped = first.filter { !secondIds.contains($0.originalTransactionId) }
                #expect(dropped.allSatisfy { !$0.reasons.contains("recovered-in-window") && !$0.reasons.contains("payload-rejected") })
                #expect(second.allSatisfy { $0.outcome == "unchanged" && $0.transactionHistoryRequests == 1 })
                #expect(secondRequests.count == second.count, "one request per customer")
                #expect(secondRequests.allSatisfy { $0.revision != nil }, "each starts at the stored revision")
                let dumpAfterSecond = try await RecoveryHarness.dump(client)
                #expect(dumpAfterSecond.filter { !$0.hasPrefix("4:") } == dumpAfterFirst.filter { !$0.hasPrefix("4:") }, "nothing changed but the runs table")
            }
        }
    }

    @Test func aDryRepairFetchesAndReportsButWritesNothingAndStoresNoRevision() async throws {
        let (harness, refund, _, _) = try Self.silencedHarness()
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, _ in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let window = try harness.window()
                let apiClient = try harness.client(baseURL)
                let before = try await RecoveryHarness.dump(client)
                let dry = try await NotificationRecovery(client: apiClient, verifier: try harness.verifier(), store: store, logger: harness.logger).run(.init(window: window, dryRun: true))
                let repairs = try await harness.repair(baseURL, store, client: apiClient).afterRecovery(dry, window: window, dryRun: true)
                #expect(try await RecoveryHarness.dump(client) == before, "no row anywhere, no revision")
                #expect(!harness.api.transactionHistoryRequests.isEmpty, "it did fetch")
                #expect(repairs.contains { $0.originalTransactionId == refund && !$0.refundsFound.isEmpty })
                #expect(repairs.contains { $0.outcome == "repaired" })
            }
        }
    }

    @Test func anInvalidStoredRevisionIsForgottenAndTheHistoryFetchedInFull() async throws {
        let harness = try RecoveryHarness(customers: 20, seed: 42, outageHours: 10)
        let customer = harness.scenario.customers[0]
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, _ in
                let store = LedgerStore(client: client, logger: harness.logger)
                var batch = LedgerBatch()
                batch.revisions[customer.originalTransactionId] = "not-a-revision-apple-knows"
                _ = try await store.apply(batch, runId: nil)
                let repairs = try await harness.repair(baseURL, store).repair([.init(customer: customer.originalTransactionId, reasons: [.named])], dryRun: false)
                // The ledger was empty: the whole history, fetched from scratch, is new.
                #expect(repairs.first?.transactionsAdded.count == Set(customer.transactionVersions.map { $0.transaction.transactionId! }).count)
                let stored = try await store.revision(of: customer.originalTransactionId)
                #expect(stored != nil && stored != "not-a-revision-apple-knows")
            }
        }
    }

    @Test func aTransactionIdAppleDoesNotKnowIsReportedNotFatal() async throws {
        let harness = try RecoveryHarness(customers: 5, seed: 43, outageHours: 10)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, _ in
                let store = LedgerStore(client: client, logger: harness.logger)
                let repairs = try await harness.repair(baseURL, store).repair(
                    [.init(customer: "9999999999999999", reasons: [.named]), .init(customer: harness.scenario.customers[0].originalTransactionId, reasons: [.named])],
                    dryRun: false
                )
                #expect(repairs.map(\.outcome).sorted() == ["not-found", "repaired"])
            }
        }
    }
}

@Suite("Gap rules, without I/O")
struct GapRuleTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func view(status: Int = 1, expires: TimeInterval, signed: TimeInterval = 1_799_000_000, transactions: [(TimeInterval, TimeInterval, TimeInterval)] = [], notifications: [(String, String?, TimeInterval)] = []) -> CustomerLedgerView {
        CustomerLedgerView(
            originalTransactionId: "1",
            subscription: SubscriptionRecord(
                originalTransactionId: "1", productId: "p", status: status, expiresDate: Date(timeIntervalSince1970: expires), autoRenewStatus: 1,
                autoRenewProductId: "p", isInBillingRetry: false, gracePeriodExpiresDate: nil, lastSignedDate: Date(timeIntervalSince1970: signed)
            ),
            transactions: transactions.enumerated().map { index, dates in
                .init(transactionId: "t\(index)", productType: "Auto-Renewable Subscription", purchaseDate: Date(timeIntervalSince1970: dates.0),
                      expiresDate: Date(timeIntervalSince1970: dates.1), revocationDate: nil, signedDate: Date(timeIntervalSince1970: dates.2))
            },
            notifications: notifications.map { .init(type: $0.0, subtype: $0.1, signedDate: Date(timeIntervalSince1970: $0.2)) }
        )
    }

    @Test func anActiveSubscriptionPastItsExpiryIsAGapButOneJustExpiredIsNotYet() {
        #expect(GapRules.evaluate(view(expires: now.timeIntervalSince1970 - 7200), now: now) == [.activeButExpired])
        #expect(GapRules.evaluate(view(expires: now.timeIntervalSince1970 - 600), now: now).isEmpty, "a renewal may still be on its way")
        #expect(GapRules.evaluate(view(status: 2, expires: now.timeIntervalSince1970 - 7200), now: now).isEmpty)
    }

    @Test func aRowOlderThanTheNewestTransactionIsAGap() {
        let future = now.timeIntervalSince1970 + 86_400
        let row = view(expires: future, signed: 1_000, transactions: [(900, future, 2_000)])
        #expect(GapRules.evaluate(row, now: now) == [.rowOlderThanTransactions])
    }

    @Test func aRenewalAfterALapseIsAGapUnlessABillingFailureExplainsIt() {
        let future = now.timeIntervalSince1970 + 86_400
        let chain = [(1_000.0, 2_000.0, 1_000.0), (5_000.0, future, 5_000.0)]
        #expect(GapRules.evaluate(view(expires: future, signed: 5_000, transactions: chain), now: now) == [.transactionChainGap])
        let explained = view(expires: future, signed: 5_000, transactions: chain, notifications: [("DID_FAIL_TO_RENEW", nil, 2_000)])
        #expect(GapRules.evaluate(explained, now: now).isEmpty)
        let contiguous = [(1_000.0, 2_000.0, 1_000.0), (2_000.0, future, 2_000.0)]
        #expect(GapRules.evaluate(view(expires: future, signed: 2_000, transactions: contiguous), now: now).isEmpty)
    }

    @Test func anExpiryThatSkipsItsStepIsAGap() {
        let future = now.timeIntervalSince1970 + 86_400
        let skipped = view(status: 2, expires: future, notifications: [("DID_RENEW", nil, 1_000), ("EXPIRED", "VOLUNTARY", 2_000)])
        #expect(GapRules.evaluate(skipped, now: now) == [.skippedStep])
        let stepped = view(status: 2, expires: future, notifications: [("DID_RENEW", nil, 1_000), ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", 1_500), ("EXPIRED", "VOLUNTARY", 2_000)])
        #expect(GapRules.evaluate(stepped, now: now).isEmpty)
        let billing = view(status: 2, expires: future, notifications: [("DID_RENEW", nil, 1_000), ("EXPIRED", "BILLING_RETRY", 2_000)])
        #expect(GapRules.evaluate(billing, now: now) == [.skippedStep])
    }
}
