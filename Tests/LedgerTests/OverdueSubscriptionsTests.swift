import Decisions
import Foundation
@testable import Ledger
import Logging
import PostgresNIO
import SignedData
import TestSupport
import Testing

/// Issue 64, point 1: what Apple owes each subscription is stored with its row by the rule, and
/// the overdue ones are found by an index, the same by the view and by the tool's own reads.
@Suite("What Apple owes, stored and found overdue, against a real PostgreSQL")
struct OverdueSubscriptionsTests {
    static let pair = AppStorePair(bundleId: "com.example.overdue", environment: .production)
    static let hour: TimeInterval = 3600

    /// A subscription of `pair` in `status`, expiring `expires` from now (real time: the view reads `now()`).
    static func subscription(
        _ id: String, status: Int?, expires: TimeInterval?, autoRenew: Int = 1, grace: TimeInterval? = nil, signed: TimeInterval = -30 * 86_400
    ) -> SubscriptionRecord {
        let now = Date()
        return SubscriptionRecord(
            originalTransactionId: id, productId: "monthly", status: status, expiresDate: expires.map { now.addingTimeInterval($0) },
            autoRenewStatus: autoRenew, autoRenewProductId: "monthly", isInBillingRetry: status == 3, gracePeriodExpiresDate: grace.map { now.addingTimeInterval($0) },
            lastSignedDate: now.addingTimeInterval(signed), environment: pair.environment.rawValue, bundleId: pair.bundleId
        )
    }

    /// One of each state the rule tells apart, with what each owes.
    static var everyState: [SubscriptionRecord] {
        [
            subscription("101", status: 1, expires: 10 * 86_400),  // renewing: owes its renewal in 10 days
            subscription("102", status: 1, expires: -3 * hour),  // renewing, expiry passed 3 h ago: overdue
            subscription("103", status: 1, expires: -30 * 60),  // expiry passed 30 min ago: not yet overdue
            subscription("104", status: 1, expires: -5 * hour, autoRenew: 0),  // auto-renew off: owes an EXPIRED
            subscription("105", status: 4, expires: -10 * 86_400, grace: -2 * hour),  // grace ended 2 h ago
            subscription("106", status: 3, expires: -61 * 86_400),  // billing retry over a day ago
            subscription("107", status: 3, expires: -59 * 86_400),  // still retrying
            subscription("108", status: 2, expires: -40 * 86_400),  // expired: owes nothing
            subscription("109", status: 5, expires: 5 * 86_400),  // revoked: owes nothing
            subscription("110", status: 1, expires: -3 * hour, grace: 2 * hour),  // recovered, Apple's grace end still ahead
        ]
    }

    static func stored(_ client: PostgresClient) async throws -> [String: (expected: String?, due: Date?)] {
        var found: [String: (expected: String?, due: Date?)] = [:]
        let rows = try await client.query("SELECT original_transaction_id, expected, due_at FROM app_store.subscriptions", logger: TestDatabase.logger)
        for try await (id, expected, due) in rows.decode((String, String?, Date?).self) { found[id] = (expected, due) }
        return found
    }

    static func expectStoredAsTheRuleSays(_ client: PostgresClient, _ records: [SubscriptionRecord], _ comment: String) async throws {
        let stored = try await stored(client)
        for record in records {
            let rule = SubscriptionDue.of(record)
            let row = stored[record.originalTransactionId]
            #expect(row?.expected == rule?.expected.rawValue, "\(comment): \(record.originalTransactionId)")
            #expect(row?.due?.unixMilliseconds == rule?.dueAt.unixMilliseconds, "\(comment): \(record.originalTransactionId)")
        }
    }

    static func apply(_ store: LedgerStore, _ records: [SubscriptionRecord], cause: ChangeCause = .webhook) async throws {
        var batch = LedgerBatch(cause: cause)
        batch.subscriptions = records
        _ = try await store.apply(batch, runId: nil)
    }

    static func viewed(_ client: PostgresClient) async throws -> [String: String] {
        var found: [String: String] = [:]
        let rows = try await client.query("SELECT original_transaction_id, expected FROM app_store.overdue_subscriptions", logger: TestDatabase.logger)
        for try await (id, expected) in rows.decode((String, String).self) { found[id] = expected }
        return found
    }

    static let overdueNow: [String: String] = ["102": "renewal_or_failure", "104": "expiry", "105": "grace_outcome", "106": "retry_outcome"]

    @Test func everyWriteStoresWhatTheRowOwesByTheRuleAndAChangeOfStateMovesIt() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            let records = Self.everyState
            try await Self.apply(store, records)
            try await Self.expectStoredAsTheRuleSays(client, records, "inserted")
            #expect(try await Self.stored(client)["108"]?.due == nil, "an expired subscription owes nothing")
            // The missed DID_RENEW arrives: the row moves a month on, and what it owes with it.
            var renewed = records[1]
            renewed.expiresDate = Date().addingTimeInterval(27 * 86_400)
            renewed.lastSignedDate = Date().addingTimeInterval(-2 * Self.hour)
            // The EXPIRED arrives: nothing is owed any more.
            var expired = records[3]
            (expired.status, expired.lastSignedDate) = (2, Date().addingTimeInterval(-Self.hour))
            try await Self.apply(store, [renewed, expired], cause: .history)
            try await Self.expectStoredAsTheRuleSays(client, [renewed, expired], "updated")
            #expect(try await Self.stored(client)["104"]?.expected == nil)
            // An older signing changes nothing, its due time included.
            var stale = records[1]
            stale.lastSignedDate = Date().addingTimeInterval(-40 * 86_400)
            try await Self.apply(store, [stale], cause: .history)
            try await Self.expectStoredAsTheRuleSays(client, [renewed], "a stale write is not applied")
        }
    }

    @Test func theViewAndTheToolsCountListTheSameOverdueSubscriptionsAndAVerificationSinceSettlesOne() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            try await Self.apply(store, Self.everyState)
            #expect(try await Self.viewed(client) == Self.overdueNow)
            let now = Date()
            #expect(try await store.overdueCounts(for: [Self.pair], now: now, after: Self.hour) == [Self.pair: 4])
            #expect(try await store.overdueCounts(for: nil, now: now, after: Self.hour) == [Self.pair: 4], "every App Store")
            let other = AppStorePair(bundleId: "com.example.other", environment: .production)
            #expect(try await store.overdueCounts(for: [other], now: now, after: Self.hour).isEmpty, "another App Store's rows are not counted")
            let listed = try await store.overdueSubscriptions(pair: Self.pair, now: now, after: Self.hour, limit: 10)
            #expect(Dictionary(uniqueKeysWithValues: listed.map { ($0.originalTransactionId, $0.expected?.rawValue ?? "") }) == Self.overdueNow)
            #expect(listed.first?.originalTransactionId == "106", "the most overdue first")
            // With a longer overdueAfter, the row due 2 h ago is not overdue yet (the tool's clock, or the view's setting).
            #expect(try await store.overdueCounts(for: [Self.pair], now: now, after: 2.5 * Self.hour) == [Self.pair: 3])
            let longer = try await client.withConnection { connection in
                try await connection.query("SET app_store.overdue_after = '150 minutes'", logger: TestDatabase.logger)
                var found: [String] = []
                for try await id in try await connection.query("SELECT original_transaction_id FROM app_store.overdue_subscriptions ORDER BY 1", logger: TestDatabase.logger)
                    .decode(String.self) { found.append(id) }
                try await connection.query("RESET app_store.overdue_after", logger: TestDatabase.logger)
                return found
            }
            #expect(longer == ["102", "104", "106"])
            // An account verified against Apple after the due time (and its hour) is not overdue:
            // Apple's answer was applied; one verified before is.
            var batch = LedgerBatch(cause: .repair)
            batch.accounts = [
                AccountVerification(pair: Self.pair, accountId: "102", members: ["102"], revision: .unchanged),
                AccountVerification(pair: Self.pair, accountId: "106", members: ["106"], revision: .unchanged),
            ]
            _ = try await store.apply(batch, runId: nil)
            try await client.query(
                "UPDATE app_store.accounts SET verified_at = now() - interval '1 day' WHERE account_id = '106'", logger: TestDatabase.logger)
            var expected = Self.overdueNow
            expected["102"] = nil
            #expect(try await Self.viewed(client) == expected)
            #expect(try await store.overdueCounts(for: [Self.pair], now: Date(), after: Self.hour) == [Self.pair: 3])
        }
    }

    @Test func theOverdueQueryIsServedByTheDueIndex() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            // Enough rows, all owing something far ahead, for the planner to prefer the index.
            let many = (0..<3_000).map { Self.subscription(String(200_000 + $0), status: 1, expires: Double($0 + 1) * 86_400) }
            for chunk in stride(from: 0, to: many.count, by: 500) { try await Self.apply(store, Array(many[chunk..<min(chunk + 500, many.count)])) }
            try await Self.apply(store, Self.everyState)
            try await client.query("ANALYZE app_store.subscriptions", logger: TestDatabase.logger)
            var plan: [String] = []
            for try await line in try await client.query("EXPLAIN SELECT count(*) FROM app_store.overdue_subscriptions", logger: TestDatabase.logger).decode(String.self) {
                plan.append(line)
            }
            #expect(plan.contains { $0.contains("subscriptions_due_idx") }, "\(plan.joined(separator: "\n"))")
        }
    }

    @Test func migrateFillsWhatRowsWrittenBeforeMigration0029OweAndLeavesARowWrittenSinceAsWritten() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            let records = Self.everyState
            try await Self.apply(store, records)
            // As a ledger written before 0029 holds them.
            try await client.query("UPDATE app_store.subscriptions SET due_at = NULL, expected = NULL", logger: TestDatabase.logger)
            let filled = try await client.withConnection { try await DueBackfill(batchRows: 3).run(on: $0, logger: TestDatabase.logger) }
            #expect(filled == records.filter { SubscriptionDue.of($0) != nil }.count)
            try await Self.expectStoredAsTheRuleSays(client, records, "backfilled")
            let again = try await client.withConnection { try await DueBackfill().run(on: $0, logger: TestDatabase.logger) }
            #expect(again == 0, "nothing left to fill")
            let outcome = try await Migrator().migrate(client, logger: TestDatabase.logger)
            #expect(outcome.applied.isEmpty && outcome.dueFilled == 0)
        }
    }
}
