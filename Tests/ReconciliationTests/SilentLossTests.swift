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
                // Not ≥ the overdue accounts: one whose other subscription another rule selected may
                // be checked under that one first (concurrently), and counted there; that each overdue
                // account was checked is asserted above.
                #expect(overdueCount.selected == overdueRepairs.count && overdueCount.selected > 0)
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

    @Test func expiriesAppleStoppedSendingForThreeDaysAreOverdueAndTheNightlyMendsThem() async throws {
        let now = Date()
        let paused = now.addingTimeInterval(-4 * 86_400)..<now.addingTimeInterval(-86_400)
        let harness = try RecoveryHarness(customers: 150, seed: 94, outageHours: 0, now: now, configure: { $0.unsentTypes = [.expired: paused] })
        let pair = harness.pair
        // Expiries happened in the pause (the truth has them) and no notification of them exists.
        let expiredInPause = harness.scenario.customers.filter { customer in
            customer.subscriptions.contains { $0.subscriptionStatus == .expired && ($0.latestTransaction.expiresDate.map { paused.contains(Date(timeIntervalSince1970: Double($0) / 1000)) } ?? false) }
        }
        #expect(!expiredInPause.isEmpty, "the world has expiries in the pause")
        #expect(!harness.scenario.notifications.contains { $0.type == .expired && paused.contains(Date(timeIntervalSince1970: Double($0.signedDate) / 1000)) })
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let overdue = Set(try await store.overdueSubscriptions(pair: pair, now: now, after: GapRules.defaultOverdueAfter, limit: 10_000).map(\.originalTransactionId))
                let owed = expiredInPause.flatMap(\.subscriptions).filter { $0.subscriptionStatus == .expired }.map(\.originalTransactionId)
                #expect(!overdue.isEmpty && overdue.isSubset(of: Set(harness.scenario.customers.flatMap(\.subscriptions).map(\.originalTransactionId))))
                #expect(owed.contains { overdue.contains($0) }, "an expiry Apple did not send leaves its subscription overdue")
                let run = try harness.reconciliation(store, url, client: try harness.client(baseURL))
                _ = try await run.execute(
                    .init(kind: .nightly, window: .nightly(firstStart: now.addingTimeInterval(-2 * 3600), overlap: 0, settle: 0), mode: .apply)
                )
                #expect(try await store.overdueCounts(for: [pair], now: now, after: GapRules.defaultOverdueAfter).isEmpty)
                // What was overdue is mended. A subscription in billing retry that Apple expired
                // early (it may, any time before its 60 days) owes nothing yet: the ledger does not
                // contradict itself, and only an audit finds it.
                let rows = try await store.subscriptions(owed, pair: pair)
                let inRetry = Set(rows.filter { $0.value.status == 3 }.map(\.key))
                let left = try await harness.mismatches(store, accounts: expiredInPause).filter { problem in !inRetry.contains { problem.hasPrefix($0) } }
                #expect(left.isEmpty, "the nightly asked Apple about what was overdue and mended it: \(left)")
                let audit = try #require(try await run.audit(sample: 100_000, repair: true, concurrency: 4).audited)
                #expect(Set(audit.differingAccounts).isSuperset(of: inRetry.filter { id in expiredInPause.contains { $0.originalTransactionId == id } }))
                let after = try await harness.mismatches(store, accounts: expiredInPause)
                #expect(after.isEmpty, "the audit mends the rest: \(after)")
            }
        }
    }
}
