import AppStoreServerAPI
import AppStoreSimulator
@testable import Decisions
import Foundation
import Reports
import Ledger
import LedgerModel
import PostgresNIO
import Reconciliation
import SignedData
import TestSupport
import Synchronization
import Testing

@Suite("Pass 2 end to end, per Apple account: what only Apple's present state can set right")
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

    /// Pass 1 and pass 2 of a run, as `run` does them.
    static func bothPasses(_ harness: RecoveryHarness, _ store: LedgerStore, _ url: DatabaseURL, _ apiClient: AppStoreServerAPIClient) async throws -> RecoveryReport {
        let window = try harness.window()
        return RecoveryReport(
            try await harness.reconciliation(store, url, client: apiClient).execute(.init(kind: .run, window: .fixed(start: window.start, end: window.end), mode: .apply))
        )
    }

    @Test func afterBothPassesEveryRowOfEveryAccountEqualsApplesTruthAndAccountsWithoutAGapCostNoRequest() async throws {
        let (harness, refund, renewal, expiry) = try Self.silencedHarness()
        #expect(harness.scenario.customers.contains { $0.subscriptions.count == 2 }, "accounts with two subscription groups")
        #expect(harness.scenario.customers.contains { $0.purchases.contains { $0.latestTransaction.type == .consumable } }, "and one-time purchases")
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let window = try harness.window()
                let apiClient = try harness.client(baseURL)
                // The passes one at a time, as ReconciliationRun composes them, to look between them.
                let runId = try await store.startRun(kind: .run, pair: harness.pair, windowStart: window.start, windowEnd: window.end)
                let passOne = try await NotificationRecovery(client: apiClient, verifier: try harness.verifier(), store: store, logger: harness.logger).run(.init(window: window, runId: runId))
                let before = try await harness.mismatches(store)
                #expect(!before.isEmpty, "pass 1 alone cannot set these customers right")
                // The rules see the expiry never notified.
                var expiryReasons: [GapReason] = []
                try await harness.repair(baseURL, store, client: apiClient).scanLedger { target in
                    if target.customer == expiry { expiryReasons = target.reasons }
                }
                #expect(expiryReasons.contains(.overdue), "\(expiryReasons)")
                let passTwo = PassTwoResult(
                    repairs: try await harness.repair(baseURL, store, client: apiClient).afterRecovery(passOne, window: window, dryRun: false),
                    startedAt: Date(), finishedAt: Date()
                )
                let report = RecoveryReport(
                    RunResult(
                        kind: .run, id: runId, mode: .apply, environment: harness.scenario.configuration.environment, startedAt: passOne.startedAt,
                        finishedAt: Date(), passOne: passOne, passTwo: passTwo
                    )
                )

                let problems = try await harness.mismatches(store)
                #expect(problems.isEmpty, "\(problems.prefix(10))")
                // An account is repaired under whichever of its originalTransactionIds pass 2 reached
                // first (seen once under the whole suite: the entry keyed by the renewal's added nothing).
                func account(of customer: String) -> [RecoveryReport.Repair] {
                    report.repairs.filter { $0.originalTransactionId == customer || $0.members.contains(customer) }
                }
                #expect(account(of: refund).contains { !$0.refundsFound.isEmpty }, "the refund is found, and highlighted")
                let renewalAccount = account(of: renewal)
                #expect(renewalAccount.map(\.transactionsAdded.count).reduce(0, +) == 1, "the missed renewal's transaction, added once")
                #expect(renewalAccount.contains { $0.reasons.contains("transaction-chain-gap") })
                // The account is repaired under whichever of its originalTransactionIds pass 2 reached
                // first (before its first check, several of one account may each be asked once).
                #expect(report.repairs.contains { entry in
                    entry.changes.contains { $0.originalTransactionId == expiry && $0.field == "status" && $0.before == "1" && $0.after == "2" }
                })
                #expect(report.counts.customersRepaired >= 3)
                // Refund requests recovered from history are listed for a person to answer.
                let consumptionRequests = report.missed.filter { $0.notificationType == "CONSUMPTION_REQUEST" }
                try #require(!consumptionRequests.isEmpty, "the world has missed refund requests")
                let markdown = report.markdown()
                #expect(markdown.contains("Refund requests awaiting consumption information (\(consumptionRequests.count))"))
                #expect(consumptionRequests.allSatisfy { markdown.contains($0.notificationUUID) })
                #expect(markdown.contains("PUT /inApps/v2/transactions/consumption/{transactionId}") && !markdown.contains("/inApps/v1/transactions/consumption"))
                #expect(markdown.contains("Respond within 12 hours of receiving the CONSUMPTION_REQUEST notification"))
                #expect(markdown.contains(ConsumptionDeadline.documentation))
                // Each with its deadline: 12 hours after Apple's first send attempt.
                for request in consumptionRequests {
                    let first = try #require(request.firstAttemptDate.flatMap { try? Date($0, strategy: .iso8601) })
                    let answerBy = try #require(request.answerBy.flatMap { try? Date($0, strategy: .iso8601) })
                    #expect(answerBy.timeIntervalSince(first) == 12 * 3600)
                }
                let answerable = consumptionRequests.filter { request in request.answerBy.flatMap { try? Date($0, strategy: .iso8601) }.map { $0 > Date() } ?? false }
                #expect(markdown.contains(answerable.isEmpty ? "past their 12-hour deadline" : "\(answerable.count) still answerable, the first by"))
                let json = String(decoding: try report.json(), as: UTF8.self)
                #expect(json.contains("\"answerBy\" : \"\(consumptionRequests[0].answerBy!)\""))
                let html = report.html()
                #expect(html.contains("answer by") && html.contains("PUT /inApps/v2/transactions/consumption/{transactionId}"))

                // Accounts without a gap: no recovered notification, no rule hit, no request.
                let asked = Set(harness.api.transactionHistoryRequests.map(\.id) + harness.api.subscriptionStatusesRequests)
                let selected = Set(report.repairs.map(\.originalTransactionId))
                #expect(asked.isSubset(of: selected))
                #expect(report.repairs.allSatisfy { $0.subscriptionStatusesRequests <= 1 }, "one statuses call per account")
                // Before pass 2 has ever asked about an account, the ledger cannot tell which
                // originalTransactionIds share it: several of one account selected together may each
                // be asked once in that first pass. Afterwards the account is asked once (the
                // second-run and two-groups tests).
                let untouched = harness.scenario.customers.filter { account in account.purchases.allSatisfy { !asked.contains($0.originalTransactionId) } }
                #expect(!untouched.isEmpty, "some accounts had nothing to repair")
            }
        }
    }

    @Test func aSecondRunOfTheWindowOverAnUnchangedWorldWritesNothingAndAsksAlmostNothing() async throws {
        let (harness, _, _, _) = try Self.silencedHarness()
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let apiClient = try harness.client(baseURL)
                func passTwoRequests() -> Int { harness.api.transactionHistoryRequests.count + harness.api.subscriptionStatusesRequests.count }
                let first = try await Self.bothPasses(harness, store, url, apiClient)
                let firstRequests = passTwoRequests()
                #expect(first.counts.customersRepaired > 0)
                let dumpAfterFirst = try await RecoveryHarness.dump(client)

                let second = try await Self.bothPasses(harness, store, url, apiClient)
                let secondRequests = passTwoRequests() - firstRequests
                #expect(second.counts.customersRepaired == 0, "0 repaired: \(second.repairs.filter { $0.outcome != .unchanged }.map(\.originalTransactionId))")
                #expect(second.counts.applied == 0)
                #expect(Double(secondRequests) <= 0.1 * Double(firstRequests), "pass 2 asked \(secondRequests) times, the first run \(firstRequests)")
                let dumpAfterSecond = try await RecoveryHarness.dump(client)
                #expect(dumpAfterSecond.filter { !$0.hasPrefix("4:") } == dumpAfterFirst.filter { !$0.hasPrefix("4:") }, "nothing changed but the runs table")
            }
        }
    }

    @Test func anAccountWithTwoSubscriptionGroupsAndOneTimePurchasesIsRepairedWholeAndASecondRepairWritesNothing() async throws {
        let harness = try RecoveryHarness(customers: 60, seed: 44, outageHours: 10)
        let account = try #require(
            harness.scenario.customers.first { account in
                account.subscriptions.count == 2 && account.purchases.contains { $0.latestTransaction.type != .autoRenewable }
            }
        )
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                let repair = try harness.repair(baseURL, store)
                // Asked with the second group's subscription: the answer covers the whole account.
                let asked = account.subscriptions[1].originalTransactionId
                let first = try await repair.repair([.init(customer: asked, reasons: [.named])], dryRun: false)
                #expect(first.first?.outcome == .repaired)
                #expect(Set(first.first?.members ?? []) == Set(account.purchases.map(\.originalTransactionId)))
                let problems = try await harness.mismatches(store, accounts: [account])
                #expect(problems.isEmpty, "\(problems)")
                let dump = try await RecoveryHarness.dump(client)
                let historyBefore = harness.api.transactionHistoryRequests.count

                // Any of its originalTransactionIds: the same account, asked once, from the revision
                // (a repair the rules chose; a named one fetches the whole history).
                let again = CustomerRepair(client: try harness.client(baseURL), verifier: try harness.verifier(), store: store, logger: harness.logger)
                let second = try await again.repair([.init(customer: account.originalTransactionId, reasons: [.transactionChainGap])], dryRun: false)
                let history = Array(harness.api.transactionHistoryRequests.dropFirst(historyBefore))
                #expect(second.first?.outcome == .unchanged)
                #expect(second.first?.account == first.first?.account)
                #expect(history.count == 1 && history.first?.revision != nil, "one transaction-history request, from the stored revision")
                #expect(second.first?.subscriptionStatusesRequests == 1)
                #expect(try await RecoveryHarness.dump(client) == dump, "nothing written: content equal, only signatures newer")
            }
        }
    }

    @Test func aProductionRunNeverAsksAboutASandboxCustomerNorTouchesItsRows() async throws {
        let now = Date()
        let production = try RecoveryHarness(customers: 40, seed: 45, environment: .production, outageHours: 30, now: now)
        let sandbox = try RecoveryHarness(customers: 40, seed: 45, environment: .sandbox, outageHours: 30, now: now)
        try await SimulatorServer.withRunning(production.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: production.logger)
                try await production.seedDeliveredNotifications(store)
                try await sandbox.seedDeliveredNotifications(store)
                // Sandbox customers whose records contradict themselves, to tempt a careless pass 2.
                try await client.query("UPDATE app_store.subscriptions SET status = 1, expires_date = now() - interval '1 day' WHERE environment = 'Sandbox'")
                let sandboxIds = Set(sandbox.scenario.customers.flatMap { $0.transactionVersions.map { $0.transaction.transactionId! } })
                let sandboxRows = try await Self.rows(of: "Sandbox", client)
                #expect(!sandboxRows.isEmpty)

                let report = try await Self.bothPasses(production, store, url, try production.client(baseURL))
                #expect(report.counts.customersChecked > 0)
                let asked = production.api.transactionHistoryRequests.map(\.id) + production.api.subscriptionStatusesRequests
                #expect(asked.allSatisfy { !sandboxIds.contains($0) }, "no request names a Sandbox customer")
                #expect(try await Self.rows(of: "Sandbox", client) == sandboxRows, "Sandbox rows byte for byte")
            }
        }
    }

    @Test func aNamedRepairFixesATransactionRowAppleNeverModified() async throws {
        let harness = try RecoveryHarness(customers: 20, seed: 47, outageHours: 10)
        let customer = try #require(harness.scenario.customers.first { $0.transactionVersions.count >= 2 })
        let environment = harness.scenario.configuration.environment.rawValue
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                let target = CustomerRepair.Target(customer: customer.originalTransactionId, reasons: [.named])
                _ = try await harness.repair(baseURL, store).repair([target], dryRun: false)
                #expect(try await store.accountState(pair: harness.pair, of: customer.originalTransactionId).revision != nil)
                // Support is right: the ledger holds a wrong row, of a transaction Apple never changed since.
                let wrong = try #require(customer.transactionVersions.first?.transaction.transactionId)
                try await client.query("UPDATE app_store.transactions SET expires_date = expires_date + interval '300 days' WHERE transaction_id = \(wrong)")
                #expect(try await harness.mismatches(store, accounts: [customer]) != [])
                let before = harness.api.transactionHistoryRequests.count

                let repairs = try await harness.repair(baseURL, store).repair([target], dryRun: false)
                let requests = harness.api.transactionHistoryRequests.dropFirst(before)
                #expect(requests.first?.revision == nil, "the whole history, not from the stored revision")
                #expect(repairs.first?.outcome == .repaired)
                #expect(repairs.first?.transactionsChanged.contains(wrong) == true)
                #expect(try await harness.mismatches(store, accounts: [customer]) == [])
                #expect(try await store.accountState(pair: harness.pair, of: customer.originalTransactionId).revision != nil, "the new revision is stored")
            }
        }
    }

    /// Issue 48, point 9: a subscription row that says something other than Apple's answer, signed
    /// at the very same millisecond, is repaired: content decides, in the plan and in the write
    /// (which used to keep the stored row when the signing times were equal).
    @Test func aRepairWritesApplesAnswerSignedAtTheSameTimeAsARowThatSaysSomethingElse() async throws {
        let harness = try RecoveryHarness(customers: 20, seed: 47, outageHours: 10)
        let customer = try #require(harness.scenario.customers.first { !$0.subscriptions.isEmpty })
        let id = try #require(customer.subscriptions.first?.originalTransactionId)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                _ = try await harness.repair(baseURL, store).repair([.init(customer: customer.originalTransactionId, reasons: [.named])], dryRun: false)
                let apple = try #require(try await store.subscriptions([id], pair: harness.pair)[id])
                #expect(try await harness.mismatches(store, accounts: [customer]) == [])
                // The row changed by something other than Apple, its signing time left as it was.
                try await client.query(
                    "UPDATE app_store.subscriptions SET status = 5, auto_renew_status = 1 - coalesce(auto_renew_status, 0) WHERE original_transaction_id = \(id)")
                let wrong = try #require(try await store.subscriptions([id], pair: harness.pair)[id])
                #expect(wrong.lastSignedDate.unixMilliseconds == apple.lastSignedDate.unixMilliseconds && wrong != apple)

                let plan = RepairPlanner.plan(truth: .init(transactions: [], subscriptions: [apple]), storedTransactions: [], storedSubscriptions: [id: wrong])
                #expect(plan.batch.subscriptions == [apple], "the plan writes Apple's answer")
                #expect(Set(plan.changes.map(\.field)).isSuperset(of: ["status", "autoRenewStatus"]))
                let outcome = try await store.apply(plan.batch, runId: nil)
                #expect(outcome.changedSubscriptions == [id])
                #expect(try await store.subscriptions([id], pair: harness.pair)[id] == apple, "the row equals Apple's answer")
                // A notification of the same signing time (not Apple's answer to a repair) still never replaces a row.
                var live = LedgerBatch(cause: .webhook)
                live.subscriptions = [wrong]
                #expect(try await store.apply(live, runId: nil).writtenSubscriptions.isEmpty)
            }
        }
    }

    /// Issue 48, point 1, in the simulator: Apple signs a DID_FAIL_TO_RENEW 7.5 hours after the
    /// BILLING_RECOVERY that ended it, carrying the failed period, while the subscription stays
    /// active. `serve` records both as delivered, and the later signature wins: the ledger says
    /// billing retry. The next run (nothing missed in its window) checks the account with Apple
    /// in its pass 2, and the row becomes Apple's answer: active.
    @Test func aBillingFailureAppleSignedLateOverARecoveryIsCheckedWithAppleByTheNextRunAndTheRowBecomesApplesAnswer() async throws {
        let harness = try RecoveryHarness(customers: 300, seed: 49, outageHours: 0) { configuration in
            configuration.renewalShare = 0.2
            configuration.lateFailuresAfterRecovery = Set(0..<300)
        }
        let late = harness.scenario.customers.filter { customer in
            let own = harness.scenario.notifications.filter { $0.customer == customer.index && $0.originalTransactionId == customer.originalTransactionId }
            guard let last = own.last, last.type == .didFailToRenew, own.dropLast().last?.subtype == .billingRecovery, customer.subscriptionStatus == .active
            else { return false }
            return (last.transaction.expiresDate ?? 0) < (customer.latestTransaction.expiresDate ?? 0)
        }
        try #require(!late.isEmpty, "the world has a failure signed late over a recovery, as the last word")
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                // serve's path records these accounts' notifications as delivered, in signedDate order.
                let indices = Set(late.map(\.index))
                let ingest = NotificationIngest(verifier: try harness.verifier(), store: store)
                _ = try await ingest.ingest(signedPayloads: try harness.scenario.notifications.filter { indices.contains($0.customer) }.map { try harness.api.signNotification($0) })
                let rows = try await store.subscriptions(late.map(\.originalTransactionId), pair: harness.pair)
                #expect(rows.values.allSatisfy { $0.status == 3 }, "serve's ledger: billing retry over the renewal")
                #expect(rows.count == late.count)

                // The next run, over the last hour: pass 1 has nothing of theirs to recover, pass 2 scans the ledger.
                let report = RecoveryReport(
                    try await harness.reconciliation(store, url, client: try harness.client(baseURL)).execute(
                        .init(kind: .run, window: .fixed(start: Date().addingTimeInterval(-3600), end: Date()), mode: .apply))
                )
                let lateIds = Set(late.map(\.originalTransactionId))
                #expect(!report.missed.contains { lateIds.contains($0.originalTransactionId ?? "") }, "nothing of theirs was missed: pass 2 alone sets them right")
                for customer in late {
                    let entries = report.repairs.filter { $0.originalTransactionId == customer.originalTransactionId || $0.members.contains(customer.originalTransactionId) }
                    #expect(entries.contains { $0.reasons.contains(GapReason.contradictedByTransactions.rawValue) }, "\(entries.map(\.reasons))")
                }
                let problems = try await harness.mismatches(store, accounts: late)
                #expect(problems.isEmpty, "every such row equals Apple's answer: \(problems.prefix(5))")
                let after = try await store.subscriptions(late.map(\.originalTransactionId), pair: harness.pair)
                #expect(after.values.allSatisfy { $0.status == 1 })
            }
        }
    }

    /// Issue 48, point 5: a Family Sharing revocation (REVOKE, FAMILY_REVOKE) and a refund that
    /// only Get Transaction History reveals are each named for what they are, in report.md, .json
    /// and .html and in the change feed; only the refund is counted as a refund.
    @Test func aFamilySharingRevocationIsNamedAsOneAndNotCountedAsARefundInTheReportsAndTheChangeFeed() async throws {
        func world(_ silenced: Set<String>) throws -> RecoveryHarness {
            try RecoveryHarness(customers: 70, seed: 71, outageHours: 96, silenced: silenced) { configuration in
                configuration.familySharingRevocations = true
                configuration.secondSubscriptionShare = 1
            }
        }
        let probe = try world([])
        let revoke = try #require(probe.scenario.notifications.first { $0.type == .revoke }, "the world revokes a family member's access")
        let refund = try #require(probe.scenario.notifications.first { $0.type == .refund && $0.transaction.inAppOwnershipType == "PURCHASED" && $0.transaction.type == .autoRenewable })
        let harness = try world([revoke.uuid, refund.uuid])
        let revoked = try #require(revoke.transaction.transactionId)
        let refunded = try #require(refund.transaction.transactionId)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let report = try await Self.bothPasses(harness, store, url, try harness.client(baseURL))
                let found = report.repairs.flatMap(\.revocationsFound)
                #expect(found.first { $0.transactionId == revoked }?.kind == "family_sharing_revoked", "\(found)")
                #expect(found.first { $0.transactionId == refunded }?.kind == "prorated_refund", "\(found)")
                let refunds = Set(report.repairs.flatMap(\.refundsFound))
                #expect(refunds.contains(refunded) && !refunds.contains(revoked), "a revocation that is not a refund is not counted as one")
                let markdown = report.markdown()
                #expect(markdown.contains("\(revoked) (Family Sharing revoked (no refund))"))
                #expect(markdown.contains("\(refunded) (prorated refund (66.667%))"))
                let html = report.html()
                #expect(html.contains("Family Sharing revoked (no refund) found only here: \(revoked)"))
                let json = String(decoding: try report.json(), as: UTF8.self)
                #expect(json.contains("\"kind\" : \"family_sharing_revoked\"") || json.contains("\"kind\":\"family_sharing_revoked\""))

                let collected = Mutex<[String]>([])
                _ = try await ChangeFeed.stream(client: client, after: 0, limit: nil, follow: false, logger: TestDatabase.logger) { lines in
                    collected.withLock { $0 += lines.map(\.json) }
                }
                let feed = collected.withLock { $0 }
                func revocation(of transaction: String) -> String? {
                    feed.last { $0.contains("\"transaction_id\" : \"\(transaction)\"") || $0.contains("\"transaction_id\": \"\(transaction)\"") || $0.contains("\"transaction_id\":\"\(transaction)\"") }
                        .flatMap { line in
                            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["revocation"] as? String
                        }
                }
                #expect(revocation(of: revoked) == "family_sharing_revoked")
                #expect(revocation(of: refunded) == "prorated_refund")
            }
        }
    }

    @Test func aSubscriptionPastItsGracePeriodAndOneWhoseBillingRetryEndedAreSelectedAndRepaired() async throws {
        let harness = try RecoveryHarness(customers: 60, seed: 48, outageHours: 2)
        // Two accounts whose every notification was delivered: the ledger agrees with Apple.
        let whole = harness.scenario.customers.filter { account in
            account.subscriptions.count == 1 && harness.scenario.notifications.allSatisfy { $0.customer != account.index || $0.delivered }
        }
        try #require(whole.count >= 2)
        let (grace, retry) = (whole[0], whole[1])
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                #expect(try await harness.mismatches(store, accounts: [grace, retry]) == [])
                // What the ledger would hold had the notifications that ended them been missed.
                try await client.query(
                    "UPDATE app_store.subscriptions SET status = 4, grace_period_expires_date = now() - interval '2 hours' WHERE original_transaction_id = \(grace.originalTransactionId)"
                )
                try await client.query(
                    "UPDATE app_store.subscriptions SET status = 3, expires_date = now() - interval '61 days' WHERE original_transaction_id = \(retry.originalTransactionId)"
                )
                let repair = try harness.repair(baseURL, store)
                var targets: [CustomerRepair.Target] = []
                try await repair.scanLedger { target in
                    if [grace.originalTransactionId, retry.originalTransactionId].contains(target.customer) { targets.append(target) }
                }
                #expect(targets.first { $0.customer == grace.originalTransactionId }?.reasons.contains(.overdue) == true)
                #expect(targets.first { $0.customer == retry.originalTransactionId }?.reasons.contains(.overdue) == true)
                let repairs = try await repair.repair(targets, dryRun: false)
                #expect(repairs.map(\.outcome) == [.repaired, .repaired])
                #expect(try await harness.mismatches(store, accounts: [grace, retry]) == [])
            }
        }
    }

    /// The simulator's upgrade: an annual plan upgraded to the monthly one, whose transaction
    /// Apple marks `isUpgraded` and whose expiry stays the annual one, later than the monthly's;
    /// then a refund request about the annual plan (CONSUMPTION_REQUEST, REFUND_DECLINED), which
    /// carries that transaction. Recorded live, it leaves the subscription on the monthly plan and
    /// its expiry, and pass 2 selects the account for its transaction history.
    @Test func aRefundRequestAboutAnUpgradedFromAnnualPlanLeavesProductAndExpiryAndPassTwoSelectsTheAccount() async throws {
        let harness = try RecoveryHarness(customers: 60, seed: 48, outageHours: 2)
        let upgraded = harness.scenario.customers.filter { account in
            account.transactionVersions.contains { $0.transaction.isUpgraded == true && $0.transaction.productId?.hasSuffix(".annual") == true }
        }
        try #require(upgraded.count >= 2)
        for account in upgraded {
            let requests = harness.scenario.notifications.filter {
                $0.customer == account.index && [.consumptionRequest, .refundDeclined].contains($0.type) && $0.transaction.isUpgraded == true
            }
            #expect(requests.count == 2, "a refund request about the upgraded-from plan, declined")
            #expect(requests.allSatisfy { ($0.transaction.expiresDate ?? 0) > (account.latestTransaction.expiresDate ?? .max) }, "it expires later")
        }
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, _ in
                let store = LedgerStore(client: client, logger: harness.logger)
                // Each account's notifications as a live receiver records them, up to the declined
                // refund (the monthly plan's next renewal would mend a wrong row): the row is the
                // monthly plan the upgrade started, with its expiry.
                let ingest = NotificationIngest(verifier: try harness.verifier(), store: store)
                let ids = upgraded.map(\.originalTransactionId)
                for account in upgraded {
                    let own = harness.scenario.notifications.filter { $0.customer == account.index && $0.originalTransactionId == account.originalTransactionId }
                    let declined = try #require(own.first { $0.type == .refundDeclined })
                    let upgrade = try #require(own.first { $0.type == .didChangeRenewalPref && $0.subtype == .upgrade })
                    try await ingest.ingest(signedPayloads: own.filter { $0.signedDate <= declined.signedDate }.map { try harness.api.signNotification($0) })
                    let row = try await store.subscriptions([account.originalTransactionId], pair: harness.pair)[account.originalTransactionId]
                    #expect(row?.productId == upgrade.transaction.productId, "\(account.originalTransactionId): the monthly plan")
                    #expect(row?.expiresDate?.unixMilliseconds == upgrade.transaction.expiresDate, "\(account.originalTransactionId): its expiry")
                    #expect(upgrade.transaction.productId?.hasSuffix(".monthly") == true)
                }
                // Then every notification.
                let all = harness.scenario.notifications
                for start in stride(from: 0, to: all.count, by: 200) {
                    try await ingest.ingest(signedPayloads: all[start..<min(start + 200, all.count)].map { try harness.api.signNotification($0) })
                }
                var targets: [CustomerRepair.Target] = []
                try await harness.repair(baseURL, store).scanLedger { target in
                    if ids.contains(target.customer) { targets.append(target) }
                }
                #expect(Set(targets.filter { $0.reasons.contains(.refundFlow) }.map(\.customer)) == Set(ids))
            }
        }
    }

    @Test func aTokenChangedBySetAppAccountTokenOnlyIsWrittenByPassTwoAndCountedAsChanged() async throws {
        let probe = try RecoveryHarness(customers: 30, seed: 49, outageHours: 2)
        // An account whose every notification was delivered: only Apple's present differs.
        let account = try #require(
            probe.scenario.customers.first { account in
                account.latestTransaction.appAccountToken != nil && account.subscriptions.count == 1 && account.purchases.count == 1
                    && probe.scenario.notifications.allSatisfy { $0.customer != account.index || $0.delivered }
            }
        )
        let token = "0d7e0000-0000-4000-8000-00000000abcd"
        let harness = try RecoveryHarness(customers: 30, seed: 49, outageHours: 2) { $0.appAccountTokensSet = [account.index: token] }
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let stored = try await store.subscriptions([account.originalTransactionId], pair: harness.pair)[account.originalTransactionId]
                #expect(stored?.appAccountToken == UUID(uuidString: account.latestTransaction.appAccountToken!), "the old token, as notified")
                let repairs = try await harness.repair(baseURL, store).repair([.init(customer: account.originalTransactionId, reasons: [.named])], dryRun: false)
                #expect(repairs.first?.outcome == .repaired, "counted as changed")
                #expect(repairs.first?.changes.contains { $0.field == "appAccountToken" && $0.after == token } == true, "\(repairs.first?.changes ?? [])")
                #expect(repairs.first?.transactionsChanged.isEmpty == false)
                let row = try await store.subscriptions([account.originalTransactionId], pair: harness.pair)[account.originalTransactionId]
                #expect(row?.appAccountToken == UUID(uuidString: token))
                let tokens = try await store.transactions(ofCustomer: account.originalTransactionId, pair: harness.pair).map(\.appAccountToken)
                #expect(!tokens.isEmpty && tokens.allSatisfy { $0 == UUID(uuidString: token) })
            }
        }
    }

    /// Every row of one environment, as text.
    static func rows(of environment: String, _ client: PostgresClient) async throws -> [String] {
        var lines: [String] = []
        let queries: [PostgresQuery] = [
            "SELECT to_jsonb(n)::text FROM app_store.notifications n WHERE environment = \(environment) ORDER BY notification_uuid",
            "SELECT to_jsonb(t)::text FROM app_store.transactions t WHERE environment = \(environment) ORDER BY transaction_id",
            "SELECT to_jsonb(s)::text FROM app_store.subscriptions s WHERE environment = \(environment) ORDER BY original_transaction_id",
            "SELECT to_jsonb(a)::text FROM app_store.accounts a WHERE environment = \(environment) ORDER BY account_id",
        ]
        for query in queries {
            for try await line in try await client.query(query).decode(String.self) { lines.append(line) }
        }
        return lines
    }

    /// Issue 64, point 3: a dry run judges what pass 1 would record as the real run's rules judge
    /// it once recorded (the gap rules over the ledger with pass 1's rows and notifications), so
    /// its pass 2 asks about the same accounts, for the same reasons, and predicts the same changes.
    @Test func aDryRunsPassTwoAsksAboutTheAccountsTheRealRunAsksAboutForTheSameReasons() async throws {
        let harness = try RecoveryHarness(customers: 120, seed: 46, outageHours: 30)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let window = try harness.window()
                let run = try harness.reconciliation(store, url, client: try harness.client(baseURL))
                func pass(_ mode: RunMode) async throws -> [String: Set<String>] {
                    let report = RecoveryReport(try await run.execute(.init(kind: .run, window: .fixed(start: window.start, end: window.end), mode: mode)))
                    // By account: two targets of one account may both be repaired when in flight together (neither run had
                    // its members before Apple answered), as one or as two entries.
                    return Dictionary(report.repairs.map { ($0.account ?? $0.originalTransactionId, Set($0.reasons)) }, uniquingKeysWith: { $0.union($1) })
                }
                let dry = try await pass(.dryRun)
                let real = try await pass(.apply)
                #expect(real.values.contains { $0.contains(GapReason.refundFlow.rawValue) }, "the world has refund flows pass 2 asks about")
                #expect(dry.count == real.count)
                for (account, reasons) in real { #expect(dry[account] == reasons, "\(account)") }
                for account in Set(dry.keys).subtracting(real.keys) { Issue.record("only the dry run asks about \(account): \(dry[account]?.sorted() ?? [])") }
            }
        }
    }

    @Test func anAccountAppleDoesNotKnowOrCallsInvalidIsReportedAndEveryOtherAccountRepaired() async throws {
        let asked = try await RecoveryHarness(customers: 120, seed: 46, outageHours: 30).accountsPassTwoAsks()
        try #require(asked.count >= 2, "\(asked)")
        let (notFound, invalid) = (asked[0], asked[1])
        var options = SimulatorOptions()
        options.failingAccounts = [notFound: .accountNotFound, invalid: .invalidTransactionId]
        let harness = try RecoveryHarness(customers: 120, seed: 46, outageHours: 30, options: options)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let report = try await Self.bothPasses(harness, store, url, try harness.client(baseURL))
                let failed = report.repairs.filter { $0.outcome == .failed }
                let failedAccounts = Set(failed.compactMap { entry in harness.scenario.customer(forTransactionId: entry.originalTransactionId)?.index })
                #expect(failedAccounts == [notFound, invalid])
                #expect(failed.contains { $0.failure?.contains("4040001") == true })
                #expect(failed.contains { $0.failure?.contains("4000006") == true })
                // Two originalTransactionIds of one account the ledger cannot yet tell apart are asked
                // about separately, so an account may fail twice.
                #expect(report.counts.customersFailed == failed.count && failed.count >= 2, "\(report.counts)")
                #expect(report.hasProblems && report.outcome == .succeededWithRejections)
                #expect(report.markdown().contains("could not be checked"))
                let others = harness.scenario.customers.filter { ![notFound, invalid].contains($0.index) }
                let problems = try await harness.mismatches(store, accounts: others)
                #expect(problems.isEmpty, "\(problems.prefix(10))")
                // Settled with Apple's answer: the next run (nothing new) asks nothing of them and ends clean (exit 0).
                let answers = try await ChangeFeedTests.lines(client, "SELECT apple_answer FROM app_store.accounts WHERE apple_answer IS NOT NULL ORDER BY 1")
                #expect(Set(answers) == ["4000006", "4040001"], "\(answers)")
                let askedBefore = (harness.api.transactionHistoryRequests.count, harness.api.subscriptionStatusesRequests.count)
                let next = try await Self.bothPasses(harness, store, url, try harness.client(baseURL))
                #expect(next.counts.customersFailed == 0 && !next.hasProblems && next.outcome == .succeeded, "\(next.counts)")
                let unknownIds = Set([notFound, invalid].flatMap { harness.scenario.customers[$0].transactionVersions.map { $0.transaction.transactionId! } })
                let askedAgain = harness.api.transactionHistoryRequests.dropFirst(askedBefore.0).map(\.id) + harness.api.subscriptionStatusesRequests.dropFirst(askedBefore.1)
                #expect(askedAgain.allSatisfy { !unknownIds.contains($0) }, "Apple is not asked about them again")
            }
        }
    }

    @Test func aDryRepairFetchesAndReportsButWritesNothingAndStoresNoRevision() async throws {
        let (harness, refund, _, _) = try Self.silencedHarness()
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let window = try harness.window()
                let apiClient = try harness.client(baseURL)
                let before = try await RecoveryHarness.dump(client)
                let dry = try await NotificationRecovery(client: apiClient, verifier: try harness.verifier(), store: store, logger: harness.logger).run(.init(window: window, dryRun: true))
                let repairs = try await harness.repair(baseURL, store, client: apiClient).afterRecovery(dry, window: window, dryRun: true)
                #expect(try await RecoveryHarness.dump(client) == before, "no row anywhere, no revision")
                #expect(!harness.api.subscriptionStatusesRequests.isEmpty, "it did ask")
                #expect(repairs.contains { $0.originalTransactionId == refund && !$0.refundsFound.isEmpty })
                #expect(repairs.contains { $0.outcome == .repaired })
            }
        }
    }

    @Test func anInvalidStoredRevisionIsForgottenAndTheHistoryFetchedInFull() async throws {
        let harness = try RecoveryHarness(customers: 20, seed: 42, outageHours: 10)
        let customer = harness.scenario.customers[0]
        let environment = harness.scenario.configuration.environment.rawValue
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                var batch = LedgerBatch(cause: .repair)
                batch.accounts = [
                    AccountVerification(pair: harness.pair, accountId: customer.originalTransactionId, members: [], revision: .store("not-a-revision-apple-knows"))
                ]
                _ = try await store.apply(batch, runId: nil)
                let repairs = try await harness.repair(baseURL, store).repair([.init(customer: customer.originalTransactionId, reasons: [.named])], dryRun: false)
                // The ledger was empty: the whole history, fetched from scratch, is new.
                #expect(repairs.first?.transactionsAdded.count == Set(customer.transactionVersions.map { $0.transaction.transactionId! }).count)
                let stored = try await store.accountState(pair: harness.pair, of: customer.originalTransactionId).revision
                #expect(stored != nil && stored != "not-a-revision-apple-knows")
            }
        }
    }

    @Test func aTransactionIdAppleDoesNotKnowIsReportedNotFatal() async throws {
        let harness = try RecoveryHarness(customers: 5, seed: 43, outageHours: 10)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                let repairs = try await harness.repair(baseURL, store).repair(
                    [
                        .init(customer: "9999999999999999", reasons: [.named]), .init(customer: harness.scenario.customers[0].originalTransactionId, reasons: [.named]),
                        .init(customer: "12ab", reasons: [.named]),
                    ],
                    dryRun: false
                )
                #expect(repairs.map(\.outcome) == [.failed, .repaired, .failed])
                #expect(repairs.first?.failure?.contains("4040010") == true)
                #expect(Array(repairs).last?.failure?.contains("not sent to Apple") == true)
                #expect(!harness.api.transactionHistoryRequests.contains { $0.id == "12ab" })
            }
        }
    }
}

@Suite("What a revocation is, without I/O")
struct RevocationKindTests {
    let date = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func eachRevocationTypeIsNamedAndOnlyRefundsAreRefunds() {
        func kind(_ type: String?, _ percent: Int? = nil, _ ownership: String? = "PURCHASED") -> RevocationKind? {
            RevocationKind(revocationDate: date, revocationType: type, revocationPercentage: percent, ownership: ownership)
        }
        #expect(RevocationKind(revocationDate: nil, revocationType: "REFUND_FULL", revocationPercentage: nil, ownership: nil) == nil)
        #expect(kind("REFUND_FULL")?.name == "full_refund" && kind("REFUND_FULL")?.isRefund == true)
        #expect(kind("REFUND_PRORATED", 67_932)?.label == "prorated refund (67.932%)")
        #expect(kind("REFUND_PRORATED", 40_000)?.label == "prorated refund (40%)")
        #expect(kind("REFUND_PRORATED", 15)?.label == "prorated refund (0.015%)")
        #expect(kind("FAMILY_REVOKE")?.isRefund == false && kind("FAMILY_REVOKE")?.name == "family_sharing_revoked")
        // Signed before Apple sent revocationType: a purchase's refund, a family member's revocation.
        #expect(kind(nil)?.name == "refund" && kind(nil)?.isRefund == true)
        #expect(kind(nil, nil, "FAMILY_SHARED")?.name == "family_sharing_revoked" && kind(nil, nil, "FAMILY_SHARED")?.isRefund == false)
        // A type Apple adds later is named by its value, never counted as a refund.
        #expect(kind("BUNDLE_SWITCH")?.name == "revoked:BUNDLE_SWITCH" && kind("BUNDLE_SWITCH")?.isRefund == false)
    }

    /// Issue 62, point 7: the plan a customer upgraded from, marked `isUpgraded` with a revocation
    /// date and no revocation type or reason, is an upgrade, never a refund; with a refund reason
    /// or type it is what they say. The change feed's SQL says the same, on a real PostgreSQL.
    @Test func anUpgradedTransactionIsAnUpgradeNotARefundInSwiftAndInTheChangeFeed() async throws {
        let upgraded = RevocationKind(revocationDate: date, revocationType: nil, revocationPercentage: nil, ownership: "PURCHASED", revocationReason: nil, isUpgraded: true)
        #expect(upgraded == .upgraded && upgraded?.isRefund == false && upgraded?.name == "upgraded" && upgraded?.label.contains("refund") == true)
        #expect(upgraded?.label == "upgraded to another plan (no refund)")
        let refundedAfterAll = RevocationKind(revocationDate: date, revocationType: nil, revocationPercentage: nil, ownership: "PURCHASED", revocationReason: 1, isUpgraded: true)
        #expect(refundedAfterAll?.isRefund == true, "a refund reason says it was refunded")
        #expect(RevocationKind(revocationDate: date, revocationType: "REFUND_FULL", revocationPercentage: nil, ownership: nil, isUpgraded: true) == .fullRefund)
        #expect(RevocationKind(revocationDate: nil, revocationType: nil, revocationPercentage: nil, ownership: nil, isUpgraded: true) == nil)
        let rows: [(String, String)] = [
            (#"{"revocation_ms": 1, "is_upgraded": true}"#, "upgraded"),
            (#"{"revocation_ms": 1, "is_upgraded": true, "revocation_reason": 0}"#, "refund"),
            (#"{"revocation_ms": 1, "is_upgraded": false}"#, "refund"),
            (#"{"revocation_ms": 1, "is_upgraded": true, "revocation_type": "REFUND_PRORATED"}"#, "prorated_refund"),
            (#"{"revocation_ms": 1}"#, "refund"),
        ]
        try await TestDatabase.withFreshLedger { client, _ in
            for (row, expected) in rows {
                let query = PostgresQuery(unsafeSQL: "SELECT \(RevocationKind.sql(row: "r")) FROM (SELECT '\(row)'::jsonb AS r) s")
                var found: String?
                for try await value in try await client.query(query).decode(String?.self) { found = value }
                #expect(found == expected, "\(row)")
            }
        }
    }
}
