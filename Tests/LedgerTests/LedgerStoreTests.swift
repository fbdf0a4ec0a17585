import Foundation
import Ledger
import PostgresNIO
import TestSupport
import Testing

@Suite("The ledger's writes against a real PostgreSQL")
struct LedgerStoreTests {
    static func notification(_ uuid: UUID, source: NotificationRecord.Source) -> NotificationRecord {
        NotificationRecord(
            notificationUUID: uuid, notificationType: "DID_RENEW", subtype: nil, signedDate: Date(timeIntervalSince1970: 1_790_000_000),
            environment: "Sandbox", originalTransactionId: "1000", transactionId: "1001", signedPayload: "a.b.c", source: source
        )
    }

    static func subscription(signedAt seconds: TimeInterval, status: Int) -> SubscriptionRecord {
        SubscriptionRecord(
            originalTransactionId: "1000", productId: "monthly", status: status, expiresDate: nil, autoRenewStatus: 1,
            autoRenewProductId: "monthly", isInBillingRetry: false, gracePeriodExpiresDate: nil,
            lastSignedDate: Date(timeIntervalSince1970: seconds)
        )
    }

    @Test func aNotificationTheWebhookRecordedMeanwhileIsADuplicateNotAnError() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            let uuid = UUID()
            var live = LedgerBatch()
            live.notifications = [Self.notification(uuid, source: .webhook)]
            #expect(try await store.apply(live, runId: nil).insertedNotifications == [uuid])
            var recovered = LedgerBatch()
            recovered.notifications = [Self.notification(uuid, source: .history)]
            let outcome = try await store.apply(recovered, runId: nil)
            #expect(outcome.insertedNotifications.isEmpty, "not inserted twice, and no error")
            var sources: [String] = []
            for try await source in try await client.query("SELECT source FROM app_store.notifications").decode(String.self) { sources.append(source) }
            #expect(sources == ["webhook"])
        }
    }

    @Test func aSubscriptionRowOnlyEverMovesToInformationSignedLater() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            var newer = LedgerBatch()
            newer.subscriptions = [Self.subscription(signedAt: 2_000, status: 5)]
            #expect(try await store.apply(newer, runId: nil).changedSubscriptions == ["1000"])
            var older = LedgerBatch()
            older.subscriptions = [Self.subscription(signedAt: 1_000, status: 1)]
            #expect(try await store.apply(older, runId: nil).changedSubscriptions.isEmpty)
            let row = try #require(try await store.subscriptions(["1000"])["1000"])
            #expect(row.status == 5, "a late DID_RENEW did not undo the REFUND")
            #expect(row.lastSignedDate.unixMilliseconds == 2_000_000)
        }
    }

    @Test func aBatchThatFailsHalfwayLeavesNothingBehind() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            var batch = LedgerBatch()
            batch.notifications = [Self.notification(UUID(), source: .history), Self.notification(UUID(), source: .history)]
            batch.rejected = [RejectedPayloadRecord(source: "history", notificationUUID: nil, reason: "malformed", detail: "x", signedPayload: "x")]
            batch.subscriptions = [Self.subscription(signedAt: 1, status: 1)]
            batch.transactions = [
                TransactionRecord(
                    transactionId: "1001", originalTransactionId: "1000", productId: nil, productType: nil, purchaseDate: nil,
                    expiresDate: nil, revocationDate: nil, revocationReason: nil, isUpgraded: nil,
                    signedDate: Date(timeIntervalSince1970: 1), environment: nil, signedTransaction: "t"
                )
            ]
            // The rejected payload is written last, and a run_id that does not exist breaks its
            // foreign key: everything written before it in the batch must roll back.
            await #expect(throws: (any Error).self) { try await store.apply(batch, runId: UUID()) }
            var counts: [Int] = []
            for table in ["notifications", "transactions", "subscriptions", "rejected_payloads"] {
                let query = PostgresQuery(unsafeSQL: "SELECT count(*) FROM app_store.\(table)")
                for try await count in try await client.query(query).decode(Int.self) { counts.append(count) }
            }
            #expect(counts == [0, 0, 0, 0], "all of the batch or none of it")
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
            if text.contains("unsafeSQL") && file.lastPathComponent != "Migrator.swift" { offenders.append(file.lastPathComponent) }
        }
        #expect(offenders.isEmpty, "string-built SQL in \\(offenders)")
    }
}
