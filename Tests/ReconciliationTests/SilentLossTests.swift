import AppStoreSimulator
import Decisions
import Foundation
import Ledger
import LedgerModel
import Reconciliation
import RunResults
import SignedData
import TestSupport
import Testing

/// Issue 64, points 1 and 5: notifications lost outside any outage, Apple believing them
/// delivered (a proxy answering 200 without passing them on), are found by what Apple owes once
/// due, and the next nightly mends them, asking Apple only about accounts that lost something.
@Suite("Notifications lost silently, found by what Apple owes")
struct SilentLossTests {
    static func harness(share: Double) throws -> RecoveryHarness {
        // No outage at all: every delivery attempt succeeded, as Apple sees it.
        try RecoveryHarness(customers: 120, seed: 93, outageHours: 0, configure: { $0.silentLossShare = share })
    }

    @Test func notificationsLostOutsideAnyOutageAreFoundOnceDueAndTheNightlyMendsThemAskingOnlyAboutThem() async throws {
        let harness = try Self.harness(share: 0.12)
        let lost = harness.scenario.notifications.filter(\.lostSilently)
        #expect(!lost.isEmpty && lost.allSatisfy { $0.sendAttempts.last?.result == "SUCCESS" }, "Apple's record says delivered")
        #expect(harness.scenario.configuration.outage.map { $0.isEmpty } ?? true, "outside any outage")
        let lossAccounts = Set(lost.map(\.customer))
        let pair = harness.pair
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let overdue = try await store.overdueSubscriptions(pair: pair, now: Date(), after: GapRules.defaultOverdueAfter, limit: 10_000)
                #expect(!overdue.isEmpty, "some loss left a subscription past its due time")
                let overdueIds = Set(overdue.map(\.originalTransactionId))
                let overdueCustomers = harness.scenario.customers.filter { customer in
                    customer.subscriptions.contains { overdueIds.contains($0.originalTransactionId) }
                }
                #expect(overdueCustomers.allSatisfy { lossAccounts.contains($0.index) }, "no false alarm: each overdue account lost a notification")
                #expect(!(try await harness.mismatches(store, accounts: overdueCustomers)).isEmpty, "and its row is wrong")

                // The next nightly: its window is the last two hours, far from most losses.
                let run = try harness.reconciliation(store, url, client: try harness.client(baseURL))
                let result = try await run.execute(
                    .init(kind: .nightly, window: .nightly(firstStart: Date().addingTimeInterval(-2 * 3600), overlap: 0, settle: 0), mode: .apply)
                )
                let report = try RecoveryReport(result)
                let repairs = Array(report.repairs)
                // An account is asked about once per pass, under whichever of its subscriptions selects it first.
                let overdueRepairs = repairs.filter { $0.reasons.contains(GapReason.overdue.rawValue) }
                let checkedForOverdue = Set(overdueRepairs.compactMap { harness.scenario.customer(forTransactionId: $0.originalTransactionId)?.index })
                let checked = Set(repairs.compactMap { harness.scenario.customer(forTransactionId: $0.originalTransactionId)?.index })
                #expect(Set(overdueCustomers.map(\.index)).isSubset(of: checked), "pass 2 asked about every overdue account, whatever the window")
                #expect(checkedForOverdue.isSubset(of: lossAccounts), "the overdue rule asked Apple only about accounts that lost a notification")
                // Statuses and the transaction history since the stored revision: the transactions the
                // lost notifications carried are recorded too.
                let left = try await harness.mismatches(store, accounts: overdueCustomers)
                #expect(left.isEmpty, "each overdue account now equals Apple's truth: \(left)")
                #expect(try await store.overdueCounts(for: [pair], now: Date(), after: GapRules.defaultOverdueAfter).isEmpty, "nothing is owed any more")
                // The report counts what the rule selected and mended, and the losses outside the window.
                let overdueCount = try #require(report.counts.repairReasons[GapReason.overdue.rawValue])
                #expect(overdueCount.selected == overdueRepairs.count && overdueCount.selected >= overdueCustomers.count)
                #expect(overdueCount.changed > 0 && overdueCount.changed <= overdueCount.selected)
                #expect(report.counts.lossesMendedOutsideWindow > 0)
            }
        }
    }

    @Test func theSameWorldWithoutLossesOwesNothingEvenWithRenewalsChargedEarly() async throws {
        let harness = try Self.harness(share: 0)
        let anyLost = harness.scenario.notifications.contains { $0.lostSilently }
        #expect(!anyLost)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                #expect(try await store.overdueCounts(for: [harness.pair], now: Date(), after: GapRules.defaultOverdueAfter).isEmpty,
                        "every renewal, charged early or not, was recorded: nothing is overdue")
                let run = try harness.reconciliation(store, url, client: try harness.client(baseURL))
                let result = try await run.execute(
                    .init(kind: .nightly, window: .nightly(firstStart: Date().addingTimeInterval(-2 * 3600), overlap: 0, settle: 0), mode: .apply)
                )
                let report = try RecoveryReport(result)
                #expect(report.counts.repairReasons[GapReason.overdue.rawValue] == nil)
            }
        }
    }
}
