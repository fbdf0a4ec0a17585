import AppStoreSimulator
import Decisions
import Foundation
import Ledger
import LedgerSupport
import PostgresNIO
import Reconciliation
import Reports
import RevenueMetrics
import SignedData
import TestSupport
import Testing

/// app_store.metrics (migration 0031) over a ledger a recovery set right, against the same
/// figures computed from the simulated world's ground truth (MetricsOracle): counts exactly,
/// amounts to the milliunit, by day, week and month.
@Suite("Revenue metrics: the ledger's figures equal the world's ground truth")
struct RevenueMetricsTests {
    static let day = 86_400.0

    /// A world of monthly (30-day) periods over 400 days: the products' durations derive from
    /// their periods, and subscriptions pass their first year of paid service.
    static func monthlyWorld() throws -> RecoveryHarness {
        // Apple's signing certificate of a year and more ago: a test PKI whose leaf was valid then.
        let now = Date()
        var options = TestPKI.Options(referenceTime: now)
        options.leafValidity = now.addingTimeInterval(-420 * day)...now.addingTimeInterval(30 * day)
        return try RecoveryHarness(
            customers: 160, seed: 65, environment: .production, outageHours: 96, now: now, apple: (try TestPKI(options), SimulatorCredentials())
        ) { configuration in
            configuration.period = 30 * day
            configuration.history = 400 * day
            configuration.familySharingRevocations = true
            // Renewals likelier than the default: some subscriptions pass a year of paid service.
            configuration.renewalShare = 0.88
            configuration.winBacks = true
        }
    }

    /// The ledger of a live server that received every notification of the world (a 400-day
    /// history is more than Get Notification History keeps): it holds the world's truth.
    static func withRecoveredLedger(_ harness: RecoveryHarness, _ body: @Sendable (LedgerStore) async throws -> Void) async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: harness.logger)
            let ingest = NotificationIngest(verifier: try harness.verifier(), store: store)
            let all = harness.scenario.notifications
            for start in stride(from: 0, to: all.count, by: 200) {
                try await ingest.ingest(signedPayloads: all[start..<min(start + 200, all.count)].map { try harness.api.signNotification($0) })
            }
            // Every row as Apple's truth has it; a restore of a one-time purchase, which no
            // notification announces, is no period and is left to the comparison below.
            let problems = try await harness.mismatches(store).filter { !$0.contains(": transactions [") }
            #expect(problems.isEmpty, "the ledger holds the world's truth: \(problems.count): \(problems.prefix(5))")
            let truth = Set(harness.scenario.customers.flatMap { $0.transactionVersions.map(\.transaction) }.filter { $0.type == .autoRenewable }.compactMap(\.transactionId))
            var stored: Set<String> = []
            let rows = try await client.query("SELECT transaction_id FROM app_store.transaction_rows WHERE product_type = 'Auto-Renewable Subscription'", logger: harness.logger)
            for try await id in rows.decode(String.self) { stored.insert(id) }
            #expect(stored == truth, "every period of the world is in the ledger")
            try await body(store)
        }
    }

    /// The rows that differ, each field that differs named.
    static func differences(_ found: [MetricsRow], _ expected: [MetricsRow]) -> [String] {
        var problems: [String] = []
        if found.count != expected.count { problems.append("\(found.count) rows, expected \(expected.count)") }
        for (row, truth) in zip(found, expected) where row != truth {
            let fields = zip(MetricsFiles.fields, zip(MetricsFiles.values(row), MetricsFiles.values(truth)))
                .filter { $0.1.0 != $0.1.1 }.map { "\($0.0) \($0.1.0) ≠ \($0.1.1)" }
            problems.append("\(MetricsFiles.values(row)[2]): \(fields.joined(separator: ", "))")
        }
        return problems
    }

    static func total(_ rows: [MetricsRow], _ value: (MetricsRow) -> Int64) -> Int64 { rows.reduce(0) { $0 + value($1) } }

    @Test func byDayWeekAndMonthEveryFigureEqualsTheGroundTruthWithDurationsDerivedFromThePeriods() async throws {
        let harness = try Self.monthlyWorld()
        let now = harness.scenario.configuration.now
        let (from, to) = (now.addingTimeInterval(-401 * Self.day), now.addingTimeInterval(Self.day))
        let derived: [String: (days: Double, unit: Character, count: Int)] = [
            "com.example.simulated.monthly": (30.4375, "M", 1), "com.example.simulated.addon.monthly": (30.4375, "M", 1),
            "com.example.simulated.annual": (365.25, "Y", 1),
        ]
        let oracle = MetricsOracle(harness.scenario, durations: derived, convention: .exact)
        try await Self.withRecoveredLedger(harness) { store in
            #expect(try await store.unnormalisedProducts() == [], "every product's duration derives from its 30- and 360-day periods")
            for interval in MetricsInterval.allCases {
                let choices = MetricsChoices(interval: interval)
                let rows = try await store.revenueMetrics(from: from, to: to, choices: choices, asOf: now)
                let expected = oracle.rows(from: from, to: to, choices: choices, asOf: now)
                let problems = Self.differences(rows, expected)
                #expect(problems.isEmpty, "by \(interval): \(problems.count) rows differ: \(problems.prefix(4))")
                if interval == .day {
                    // The world holds every case the definitions name, so equality says something.
                    #expect(Self.total(rows, \.trialConversions) > 0 && Self.total(rows, \.trialStarts) > Self.total(rows, \.trialConversions))
                    #expect(Self.total(rows, \.churnedVoluntary) > 0 && Self.total(rows, \.churnedBilling) > 0 && Self.total(rows, \.churnedRefund) > 0)
                    #expect(Self.total(rows, \.churned) > Self.total(rows, \.churnedVoluntary) + Self.total(rows, \.churnedBilling) + Self.total(rows, \.churnedRefund), "and other reasons")
                    #expect(Self.total(rows, \.reactivations) > 0, "customers won back")
                    #expect(Self.total(rows, \.refundCount) > 0 && rows.contains { $0.mrr > 0 && $0.activeSubscriptions > 0 })
                    let proceeds = Self.total(rows, \.estimatedProceeds), net = Self.total(rows, \.gross) - Self.total(rows, \.refundAmount)
                    #expect(proceeds > net * 70 / 100 && proceeds < net * 85 / 100, "some periods after a first year of paid service: \(proceeds) of \(net)")
                }
                if interval == .week {
                    // Grace time lapsed: access ends at the expiry.
                    let lapsed = MetricsChoices(interval: .week, gracePeriod: .lapsed)
                    let lapsedRows = try await store.revenueMetrics(from: from, to: to, choices: lapsed, asOf: now)
                    let truth = MetricsOracle(harness.scenario, durations: derived, convention: .exact, grace: .lapsed).rows(from: from, to: to, choices: lapsed, asOf: now)
                    #expect(Self.differences(lapsedRows, truth).isEmpty, "grace lapsed: \(Self.differences(lapsedRows, truth).prefix(3))")
                    #expect(lapsedRows.map(\.activeSubscriptions) != rows.map(\.activeSubscriptions) || lapsedRows.map(\.churned) != rows.map(\.churned), "grace time moves some access")
                }
                if interval == .month {
                    // The small business program: 85% throughout.
                    var small = choices
                    small.smallBusinessProgram = true
                    let smallRows = try await store.revenueMetrics(from: from, to: to, choices: small, asOf: now)
                    #expect(Self.differences(smallRows, oracle.rows(from: from, to: to, choices: small, asOf: now)).isEmpty)
                    #expect(Self.total(smallRows, \.estimatedProceeds) > Self.total(rows, \.estimatedProceeds))
                    // Refunds at the refunded period's start: the same refunds, some in earlier months.
                    var atPurchase = choices
                    atPurchase.refunds = .atPurchase
                    let moved = try await store.revenueMetrics(from: from, to: to, choices: atPurchase, asOf: now)
                    #expect(Self.differences(moved, oracle.rows(from: from, to: to, choices: atPurchase, asOf: now)).isEmpty)
                    #expect(Self.total(moved, \.refundAmount) == Self.total(rows, \.refundAmount))
                    #expect(moved.map(\.refundAmount) != rows.map(\.refundAmount), "some refund came in a later month than its period")
                    #expect(moved.map(\.mrr) == rows.map(\.mrr) && moved.map(\.gross) == rows.map(\.gross), "and nothing else moves")
                    // Apple's price points: the monthly product's price in the USA earns the
                    // point's proceeds (figures made up for the test, unlike 70% / 85%), the year-2
                    // figure after a year of paid service; a point of another territory matches
                    // nothing; the annual product keeps the estimate; nothing else moves.
                    let points = PricePoints(points: [
                        .init(productId: "com.example.simulated.monthly", territory: "USA", customerPrice: 4990, proceeds: 3400, proceedsYear2: 4100),
                        .init(productId: "com.example.simulated.monthly", territory: "CAN", customerPrice: 4990, proceeds: 1, proceedsYear2: 1),
                    ])
                    let priced = try await store.revenueMetrics(from: from, to: to, choices: choices, asOf: now, pricePoints: points)
                    let pricedTruth = oracle.rows(from: from, to: to, choices: choices, asOf: now, pricePoints: points)
                    #expect(Self.differences(priced, pricedTruth).isEmpty, "price points: \(Self.differences(priced, pricedTruth).prefix(4))")
                    // The simulator charges 4.99 for every paid period: without points each is an estimate.
                    #expect(Self.total(rows, \.proceedsEstimated) * 4990 == Self.total(rows, \.gross), "without price points every paid period is an estimate")
                    #expect(Self.total(priced, \.proceedsEstimated) > 0 && Self.total(priced, \.proceedsEstimated) < Self.total(rows, \.proceedsEstimated))
                    #expect(Self.total(priced, \.estimatedProceeds) < Self.total(rows, \.estimatedProceeds))
                    var same = priced
                    for index in same.indices {
                        same[index].estimatedProceeds = rows[index].estimatedProceeds
                        same[index].proceedsEstimated = rows[index].proceedsEstimated
                    }
                    #expect(same == rows, "and nothing else moves")
                    let left = try await store.client.query("SELECT count(*) FROM app_store.price_points", logger: store.logger)
                    for try await count in left.decode(Int64.self) { #expect(count == 0, "the query's set is deleted with it") }
                }
            }
        }
    }

    /// The family member's purchases are counted nowhere; the upgraded-from annual plan is no
    /// refund; a prorated refund counts its share.
    @Test func aFamilyMemberAnUpgradeAndAProratedRefundAreCountedAsDefined() async throws {
        let harness = try Self.monthlyWorld()
        let now = harness.scenario.configuration.now
        let transactions = harness.scenario.customers.flatMap { $0.transactionVersions.map(\.transaction) }
        let family = Set(transactions.filter { $0.inAppOwnershipType == "FAMILY_SHARED" && $0.type == .autoRenewable }.map(\.originalTransactionId))
        let upgraded = Set(transactions.filter { $0.isUpgraded == true }.map(\.transactionId))
        let prorated = transactions.filter { $0.revocationType == "REFUND_PRORATED" }
        #expect(!family.isEmpty && !upgraded.isEmpty && !prorated.isEmpty)
        try await Self.withRecoveredLedger(harness) { store in
            let periods = try await store.client.query(
                """
                SELECT original_transaction_id, transaction_id, family_shared, refunded_at IS NOT NULL, coalesce(refund_milliunits, 0), price_milliunits, period_days::text
                FROM app_store.subscription_periods
                """,
                logger: store.logger
            )
            var refunds: [String: Int64] = [:]
            var familyRows = 0
            for try await (original, transaction, shared, refunded, amount, price, days) in periods.decode((String, String, Bool, Bool, Int64, Int64?, String?).self) {
                if family.contains(original) { #expect(shared); familyRows += 1 }
                if upgraded.contains(transaction) { #expect(!refunded, "an upgrade is not a refund") }
                if refunded { refunds[transaction] = amount }
                #expect(days == "30.4375" || days == "365.25", "\(transaction): \(days ?? "nil")")
            }
            #expect(familyRows > 0)
            for transaction in prorated {
                #expect(refunds[transaction.transactionId!] == (transaction.price! * Int64(transaction.revocationPercentage!) + 50_000) / 100_000)
            }
        }
    }

    /// Sandbox's accelerated renewals (a day for a month here) give no duration: without the
    /// configuration's `products` every paid period is unnormalised, listed, and left out of MRR;
    /// with them MRR is as the truth gives it, and `revenuecat` changes exactly the weekly
    /// product's factor (×4 for ×365.25/12/7).
    @Test func sandboxPeriodsAreUnnormalisedUntilConfiguredAndTheRevenueCatConventionChangesOnlyTheWeeklyFactor() async throws {
        let harness = try RecoveryHarness(customers: 120, seed: 66)
        let now = harness.scenario.configuration.now
        let (from, to) = (now.addingTimeInterval(-8 * Self.day), now.addingTimeInterval(Self.day))
        let configured: [String: ProductDuration] = [
            "com.example.simulated.monthly": ProductDuration("P1M")!, "com.example.simulated.annual": ProductDuration("P1Y")!,
            "com.example.simulated.addon.monthly": ProductDuration("P1W")!,
        ]
        let days = configured.mapValues { duration -> (days: Double, unit: Character, count: Int) in
            let unit: Double = [.day: 1, .week: 7, .month: 30.4375, .year: 365.25][duration.unit]!
            return (unit * Double(duration.count), duration.unit.rawValue, duration.count)
        }
        try await Self.withRecoveredLedger(harness) { store in
            let bare = try await store.revenueMetrics(from: from, to: to, choices: MetricsChoices(), asOf: now)
            #expect(bare.allSatisfy { $0.mrr == 0 && $0.activeUnnormalised == $0.activeSubscriptions })
            #expect(bare.contains { $0.activeSubscriptions > 0 })
            let listed = try await store.unnormalisedProducts()
            #expect(Set(listed.map(\.productId)).isSuperset(of: ["com.example.simulated.monthly", "com.example.simulated.addon.monthly"]), "\(listed)")

            try await store.configureProductDurations(configured)
            #expect(try await store.unnormalisedProducts() == [])
            for convention in MRRConvention.allCases {
                let choices = MetricsChoices(interval: .day, convention: convention)
                let rows = try await store.revenueMetrics(from: from, to: to, choices: choices, asOf: now)
                let expected = MetricsOracle(harness.scenario, durations: days, convention: convention).rows(from: from, to: to, choices: choices, asOf: now)
                #expect(Self.differences(rows, expected).isEmpty, "\(convention): \(Self.differences(rows, expected).prefix(4))")
            }
            let exact = try await store.revenueMetrics(from: from, to: to, choices: MetricsChoices(), asOf: now)
            let revenuecat = try await store.revenueMetrics(from: from, to: to, choices: MetricsChoices(convention: .revenuecat), asOf: now)
            #expect(exact.map(\.mrr) != revenuecat.map(\.mrr), "the weekly add-on's MRR differs")
            var same = revenuecat
            for index in same.indices { same[index].mrr = exact[index].mrr }
            #expect(same == exact, "and nothing else does")
            // A product the configuration no longer names goes back to its derived duration (none here).
            try await store.configureProductDurations([:])
            #expect(try await store.unnormalisedProducts().count == listed.count)
        }
    }

    /// `--as-known-at`: the numbers as the ledger showed them before a recovery, rebuilt from the
    /// change feed after it, equal those computed then; the recovery changed them.
    @Test func theNumbersAsKnownBeforeARecoveryAreTheOnesTheLedgerShowedThen() async throws {
        let harness = try RecoveryHarness(customers: 120, seed: 68)
        let now = harness.scenario.configuration.now
        let (from, to) = (now.addingTimeInterval(-8 * Self.day), now.addingTimeInterval(Self.day))
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await store.configureProductDurations([
                    "com.example.simulated.monthly": ProductDuration("P1M")!, "com.example.simulated.annual": ProductDuration("P1Y")!,
                    "com.example.simulated.addon.monthly": ProductDuration("P1M")!,
                ])
                try await harness.seedDeliveredNotifications(store)
                try await Task.sleep(for: .milliseconds(20))
                let then = Date()
                try await Task.sleep(for: .milliseconds(20))
                let shown = try await store.revenueMetrics(from: from, to: to, choices: MetricsChoices(), asOf: then)
                let window = try harness.window()
                _ = try await harness.reconciliation(store, url, client: try harness.client(baseURL))
                    .execute(.init(kind: .run, window: .fixed(start: window.start, end: window.end), mode: .apply))
                let after = try await store.revenueMetrics(from: from, to: to, choices: MetricsChoices(), asOf: then)
                #expect(after != shown, "the recovery changed the numbers")
                #expect(after.map(\.mrr) != shown.map(\.mrr) || after.map(\.activeSubscriptions) != shown.map(\.activeSubscriptions))
                let known = try await store.revenueMetrics(from: from, to: to, choices: MetricsChoices(), asOf: then, knownAt: then)
                #expect(Self.differences(known, shown).isEmpty, "\(Self.differences(known, shown).prefix(4))")
                let current = try await store.revenueMetrics(from: from, to: to, choices: MetricsChoices(), asOf: then, knownAt: Date())
                #expect(Self.differences(current, after).isEmpty, "known now is as now: \(Self.differences(current, after).prefix(4))")
                #expect(try await store.firstChangeRecorded().map { $0 < then } == true)
            }
        }
    }
}
