import Foundation
@testable import Ledger
import PostgresNIO
import SignedData
import TestSupport
import Testing

@Suite("The ledger's writes against a real PostgreSQL")
struct LedgerStoreTests {
    /// The App Store every row of these tests is of.
    static let pair = AppStorePair(bundleId: "com.example.ledger", environment: .sandbox)

    static func notification(_ uuid: UUID, source: NotificationRecord.Source) -> NotificationRecord {
        NotificationRecord(
            notificationUUID: uuid, notificationType: "DID_RENEW", subtype: nil, signedDate: Date(timeIntervalSince1970: 1_790_000_000),
            environment: "Sandbox", bundleId: Self.pair.bundleId, originalTransactionId: "1000", transactionId: "1001", signedPayload: "a.b.c", source: source
        )
    }

    static func transaction(_ id: String, customer: String, signedAt date: Date, signed: String) -> TransactionRecord {
        TransactionRecord(
            transactionId: id, originalTransactionId: customer, productId: nil, productType: nil, purchaseDate: nil,
            expiresDate: nil, revocationDate: nil, revocationReason: nil, isUpgraded: nil,
            signedDate: date, environment: "Sandbox", bundleId: Self.pair.bundleId, signedTransaction: signed
        )
    }

    static func subscription(signedAt seconds: TimeInterval, status: Int) -> SubscriptionRecord {
        SubscriptionRecord(
            originalTransactionId: "1000", productId: "monthly", status: status, expiresDate: nil, autoRenewStatus: 1,
            autoRenewProductId: "monthly", isInBillingRetry: false, gracePeriodExpiresDate: nil,
            lastSignedDate: Date(timeIntervalSince1970: seconds), environment: "Sandbox",
            bundleId: Self.pair.bundleId
        )
    }

    @Test func aNotificationTheWebhookRecordedMeanwhileIsADuplicateNotAnError() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            let uuid = UUID()
            var live = LedgerBatch(cause: .webhook)
            live.notifications = [Self.notification(uuid, source: .webhook)]
            #expect(try await store.apply(live, runId: nil).insertedNotifications == [uuid])
            var recovered = LedgerBatch(cause: .history)
            recovered.notifications = [Self.notification(uuid, source: .history)]
            let outcome = try await store.apply(recovered, runId: nil)
            #expect(outcome.insertedNotifications.isEmpty, "not inserted twice, and no error")
            var sources: [String] = []
            for try await source in try await client.query("SELECT source FROM app_store.notifications").decode(String.self) { sources.append(source) }
            #expect(sources == ["webhook"])
        }
    }

    /// The checkpoint a batch writes is found again by the window it was written for, to the
    /// microsecond a bound timestamptz carries (a nightly run's window is not whole seconds),
    /// and it is written only with the batch that completes it.
    @Test func aBatchsCheckpointIsReadBackByItsWindowToTheMicrosecond() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            let scope = CheckpointScope(
                pair: Self.pair, windowStart: Date(timeIntervalSince1970: 1_790_000_000.123456),
                windowEnd: Date(timeIntervalSince1970: 1_790_086_400.987654), onlyFailures: false, shard: "0/1")
            let point = QueryCheckpoint(query: "history:DID_RENEW", position: 42, paginationToken: "token-\"7\"", completed: false)
            var batch = LedgerBatch(cause: .history)
            batch.notifications = [Self.notification(UUID(), source: .history)]
            _ = try await store.apply(batch, runId: nil, checkpoint: (point, scope))
            let read = try await store.checkpoints(in: scope)
            #expect(read["history:DID_RENEW"]?.position == 42)
            #expect(read["history:DID_RENEW"]?.paginationToken == "token-\"7\"")
            #expect(read["history:DID_RENEW"]?.completed == false)
            var other = scope
            other.windowStart = Date(timeIntervalSince1970: 1_790_000_000.123)
            #expect(try await store.checkpoints(in: other).isEmpty, "a window a millisecond's fraction apart is another window")
        }
    }

    @Test func aSubscriptionRowOnlyEverMovesToInformationSignedLater() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            var newer = LedgerBatch(cause: .history)
            newer.subscriptions = [Self.subscription(signedAt: 2_000, status: 5)]
            #expect(try await store.apply(newer, runId: nil).changedSubscriptions == ["1000"])
            var older = LedgerBatch(cause: .history)
            older.subscriptions = [Self.subscription(signedAt: 1_000, status: 1)]
            #expect(try await store.apply(older, runId: nil).changedSubscriptions.isEmpty)
            let row = try #require(try await store.subscriptions(["1000"], pair: Self.pair)["1000"])
            #expect(row.status == 5, "a late DID_RENEW did not undo the REFUND")
            #expect(row.lastSignedDate.unixMilliseconds == 2_000_000)
        }
    }

    /// A newer version that says what the row says (a live notification re-signed, or a repair
    /// racing `serve`) moves the signing time alone: reported written, not changed; the stored
    /// JWS and `updated_at` stay, and a run's record of changes gets nothing.
    @Test func aNewerVersionWithTheSameContentMovesOnlyTheSigningTimeAndIsNotAChange() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            var first = LedgerBatch(cause: .webhook)
            first.transactions = [Self.transaction("1001", customer: "1000", signedAt: Date(timeIntervalSince1970: 1_000), signed: "first.jws.sig")]
            first.subscriptions = [Self.subscription(signedAt: 1_000, status: 1)]
            let inserted = try await store.apply(first, runId: nil)
            #expect(inserted.changedTransactions == ["1001"] && inserted.changedSubscriptions == ["1000"], "new rows are changes")
            /// (stored JWS or "-", signing time in seconds, updated_at) of the transaction, then the subscription.
            func stored() async throws -> [[String]] {
                let query: PostgresQuery = """
                    SELECT signed_transaction || '|' || round(extract(epoch FROM signed_date))::text || '|' || extract(epoch FROM updated_at)::text
                    FROM app_store.transactions
                    UNION ALL SELECT '-|' || round(extract(epoch FROM last_signed_date))::text || '|' || extract(epoch FROM updated_at)::text
                    FROM app_store.subscriptions
                    """
                var rows: [[String]] = []
                for try await line in try await client.query(query).decode(String.self) { rows.append(line.split(separator: "|").map(String.init)) }
                return rows
            }
            let before = try await stored()

            let runId = try await store.startRun(kind: .run, pair: Self.pair, windowStart: nil, windowEnd: nil)
            var again = LedgerBatch(cause: .repair)
            again.transactions = [Self.transaction("1001", customer: "1000", signedAt: Date(timeIntervalSince1970: 2_000), signed: "second.jws.sig")]
            again.subscriptions = [Self.subscription(signedAt: 2_000, status: 1)]
            again.subscriptionsBefore = ["1000": Self.subscription(signedAt: 1_000, status: 1)]
            let outcome = try await store.apply(again, runId: runId)
            #expect(outcome.writtenTransactions == ["1001"] && outcome.writtenSubscriptions == ["1000"])
            #expect(outcome.changedTransactions.isEmpty && outcome.changedSubscriptions.isEmpty, "nothing the rows say changed")
            let after = try await stored()
            #expect(after.map { $0[0] } == ["first.jws.sig", "-"], "the JWS that first said it")
            #expect(after.map { $0[1] } == ["2000", "2000"], "the newer signing time")
            #expect(after.map { $0[2] } == before.map { $0[2] }, "updated_at: when the content last changed")
            #expect(try await store.subscriptionChanges(ofRun: runId, after: nil, limit: 10).isEmpty)
        }
    }

    @Test func aRunsRecordOfChangesKeepsTheRowBeforeItsFirstChangeAndTheNewestAfterIt() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            var live = LedgerBatch(cause: .webhook)
            live.subscriptions = [Self.subscription(signedAt: 1_000, status: 1)]
            _ = try await store.apply(live, runId: nil)
            let runId = try await store.startRun(kind: .run, pair: Self.pair, windowStart: nil, windowEnd: nil)
            // Two pages of one run change the same subscription; a third page's older row changes nothing.
            var first = LedgerBatch(cause: .history)
            first.subscriptions = [Self.subscription(signedAt: 2_000, status: 2)]
            first.subscriptionsBefore = ["1000": Self.subscription(signedAt: 1_000, status: 1)]
            _ = try await store.apply(first, runId: runId)
            var second = LedgerBatch(cause: .history)
            second.subscriptions = [Self.subscription(signedAt: 3_000, status: 5)]
            second.subscriptionsBefore = ["1000": Self.subscription(signedAt: 2_000, status: 2)]
            _ = try await store.apply(second, runId: runId)
            var stale = LedgerBatch(cause: .history)
            stale.subscriptions = [Self.subscription(signedAt: 1_500, status: 1)]
            stale.subscriptionsBefore = ["1000": Self.subscription(signedAt: 3_000, status: 5)]
            #expect(try await store.apply(stale, runId: runId).changedSubscriptions.isEmpty)
            // A customer new to the ledger has no row before.
            var fresh = LedgerBatch(cause: .history)
            var newcomer = Self.subscription(signedAt: 4_000, status: 1)
            newcomer.originalTransactionId = "2000"
            fresh.subscriptions = [newcomer]
            fresh.subscriptionsBefore = ["2000": SubscriptionRecord?.none]
            _ = try await store.apply(fresh, runId: runId)

            let changes = try await store.subscriptionChanges(ofRun: runId, after: nil, limit: 10)
            #expect(changes.map(\.customer) == ["1000", "2000"])
            #expect(changes.first?.before == Self.subscription(signedAt: 1_000, status: 1), "the row before the run's first change")
            #expect(changes.first?.after == Self.subscription(signedAt: 3_000, status: 5), "the row as the run left it")
            #expect(changes.last?.before == nil)
            #expect(changes.last?.after == newcomer)
            // Read a chunk at a time.
            #expect(try await store.subscriptionChanges(ofRun: runId, after: nil, limit: 1).map(\.customer) == ["1000"])
            #expect(try await store.subscriptionChanges(ofRun: runId, after: "1000", limit: 1).map(\.customer) == ["2000"])
            #expect(try await store.subscriptionChanges(ofRun: UUID(), after: nil, limit: 10).isEmpty)
        }
    }

    @Test func aBatchThatFailsHalfwayLeavesNothingBehind() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            var batch = LedgerBatch(cause: .history)
            batch.notifications = [Self.notification(UUID(), source: .history), Self.notification(UUID(), source: .history)]
            batch.rejected = [RejectedPayloadRecord(source: "history", notificationUUID: nil, reason: "malformed", detail: "x", signedPayload: "x")]
            batch.subscriptions = [Self.subscription(signedAt: 1, status: 1)]
            batch.transactions = [Self.transaction("1001", customer: "1000", signedAt: Date(timeIntervalSince1970: 1), signed: "t")]
            // A run_id that does not exist breaks the foreign keys of what is written last (the
            // run's record of changes, the rejected payload): everything written before must roll back.
            await #expect(throws: (any Error).self) { try await store.apply(batch, runId: UUID()) }
            var counts: [Int] = []
            for table in ["notifications", "transactions", "subscriptions", "rejected_payloads"] {
                let query = PostgresQuery(unsafeSQL: "SELECT count(*) FROM app_store.\(table)")
                for try await count in try await client.query(query).decode(Int.self) { counts.append(count) }
            }
            #expect(counts == [0, 0, 0, 0], "all of the batch or none of it")
        }
    }

    /// A new ledger's tables are small. Looked up as `key = ANY(array)`, a batch's hundred keys
    /// made the planner read each table whole (a hundred index probes priced at
    /// random_page_cost looked dearer), batch after batch, until the tables were some tens of
    /// thousands of rows long. Checked before and after an ANALYZE, with autovacuum off for
    /// these tables so that "before" is sure to be a table never analyzed.
    @Test func aBatchsKeysAreLookedUpByPrimaryKeyInASmallLedgerAnalyzedOrNotAndFoundOrNot() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            // The tables under the readers' views (migration 0021); their indexes kept their names.
            let tables = ["notification_rows", "transaction_rows", "subscriptions"]
            for table in tables {
                try await client.query(PostgresQuery(unsafeSQL: "ALTER TABLE app_store.\(table) SET (autovacuum_enabled = false)"))
            }
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            let signed = Date(timeIntervalSince1970: 1_790_000_000)
            var uuids: [UUID] = []
            for page in 0..<30 {
                var batch = LedgerBatch(cause: .webhook)
                for n in page * 100..<(page + 1) * 100 {
                    let uuid = UUID()
                    uuids.append(uuid)
                    var notification = Self.notification(uuid, source: .webhook)
                    notification.originalTransactionId = "c\(n)"
                    notification.transactionId = "t\(n)"
                    batch.notifications.append(notification)
                    batch.transactions.append(Self.transaction("t\(n)", customer: "c\(n)", signedAt: signed, signed: "a.b.c"))
                    var subscription = Self.subscription(signedAt: 1_790_000_000, status: n % 5 + 1)
                    subscription.originalTransactionId = "c\(n)"
                    batch.subscriptions.append(subscription)
                }
                _ = try await store.apply(batch, runId: nil)
            }
            // 100 keys of each kind: 90 in the ledger, 10 not, and one of each given twice.
            let customers = (0..<90).map { "c\($0 * 31)" } + (0..<10).map { "absent-c\($0)" }
            let transactions = (0..<90).map { "t\($0 * 29)" } + (0..<10).map { "absent-t\($0)" } + ["t0"]
            let notifications = (0..<90).map { uuids[$0 * 23] } + (0..<10).map { _ in UUID() } + [uuids[0]]
            let read = LedgerStore.PageStateRead(pair: Self.pair, customers: customers, transactions: transactions, notifications: notifications)
            for analyzed in [false, true] {
                if analyzed {
                    try await client.query(PostgresQuery(unsafeSQL: "ANALYZE " + tables.map { "app_store.\($0)" }.joined(separator: ", ")))
                }
                var neverAnalyzed: [Bool] = []
                let reltuples = "SELECT reltuples < 0 FROM pg_class WHERE oid IN (" + tables.map { "'app_store.\($0)'::regclass" }.joined(separator: ", ") + ")"
                for try await flag in try await client.query(PostgresQuery(unsafeSQL: reltuples)).decode(Bool.self) { neverAnalyzed.append(flag) }
                #expect(neverAnalyzed == Array(repeating: !analyzed, count: 3), "the tables are \(analyzed ? "" : "not ")analyzed")
                var explain = read.query
                explain.sql = "EXPLAIN " + explain.sql
                var plan: [String] = []
                for try await line in try await client.query(explain).decode(String.self) { plan.append(line) }
                let shown = "analyzed: \(analyzed)\n" + plan.joined(separator: "\n")
                #expect(!plan.contains { $0.contains("Seq Scan") }, "\(shown)")
                for index in ["notifications_pkey", "transactions_pkey", "subscriptions_pkey"] {
                    #expect(plan.contains { $0.contains("Index") && $0.contains(index) }, "\(index) unused: \(shown)")
                }
            }
            let state = try await store.pageState(pair: Self.pair, notifications: notifications, customers: customers, transactions: transactions)
            #expect(state.existingNotifications == Set(notifications.prefix(90)))
            #expect(Set(state.subscriptions.keys) == Set(customers.prefix(90)))
            var expected = Self.subscription(signedAt: 1_790_000_000, status: 31 * 7 % 5 + 1)
            expected.originalTransactionId = "c\(31 * 7)"
            #expect(state.subscriptions["c\(31 * 7)"] == expected, "a whole row read back")
            #expect(Set(state.transactionSignedDates.keys) == Set(transactions.prefix(90)))
            #expect(state.transactionSignedDates.values.allSatisfy { $0 == signed })
        }
    }
}

@Suite("SQL is built only with bound parameters")
struct BoundParametersTests {
    @Test func noSourceFileBuildsSQLTextExceptTheMigrator() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" } ?? []
        #expect(files.count > 20)
        var offenders: [String] = []
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            // The migrator runs the project's own sql/ files; LedgerStore+RefundFacts the team's own facts
            // query, its values bound, read only.
            if text.contains("unsafeSQL") && !["Migrator.swift", "LedgerStore+RefundFacts.swift"].contains(file.lastPathComponent) { offenders.append(file.lastPathComponent) }
        }
        #expect(offenders.isEmpty, "string-built SQL in \(offenders)")
    }
}
