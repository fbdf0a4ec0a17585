import Foundation
@testable import Ledger
import LedgerModel
import PostgresNIO
import SignedData
import TestSupport
import Testing

/// The refund requests open for an answer, and the answers recorded (migration 0024), against a
/// real PostgreSQL.
@Suite struct RefundAnswerStoreTests {
    static let pair = AppStorePair(bundleId: "com.example.refunds", environment: .sandbox)

    /// A row of app_store.consumption_requests, as a writer records one.
    static func request(_ client: PostgresClient, transaction: String, deadline: Date, answered: Date? = nil, bundleId: String = pair.bundleId) async throws {
        try await client.query(
            """
            INSERT INTO app_store.consumption_requests (notification_uuid, environment, bundle_id, original_transaction_id, transaction_id, product_id,
                sent_date, deadline_date, answered_date)
            VALUES (\(UUID()), 'Sandbox', \(bundleId), '1000', \(transaction), 'com.example.coins', \(deadline.addingTimeInterval(-43_200)), \(deadline), \(answered))
            """,
            logger: TestDatabase.logger
        )
    }

    @Test func openRequestsAreTheUnansweredOnesWhoseDeadlineIsAheadOnePerTransaction() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            let now = Date(timeIntervalSince1970: 1_790_000_000)
            try await Self.request(client, transaction: "2001", deadline: now.addingTimeInterval(3_600))
            try await Self.request(client, transaction: "2001", deadline: now.addingTimeInterval(7_200))
            try await Self.request(client, transaction: "2002", deadline: now.addingTimeInterval(600))
            try await Self.request(client, transaction: "2003", deadline: now.addingTimeInterval(-1), answered: nil)
            try await Self.request(client, transaction: "2004", deadline: now.addingTimeInterval(600), answered: now)
            try await Self.request(client, transaction: "2005", deadline: now.addingTimeInterval(600), bundleId: "com.example.other")
            let open = try await store.openRefundRequests(pair: Self.pair, now: now)
            #expect(open.map(\.transactionId) == ["2002", "2001"], "soonest first; past deadlines, answered ones and other apps' left out")
            #expect(open.last?.rows == 2)
            #expect(open.last?.deadline == now.addingTimeInterval(3_600))
            #expect(try await store.gauges(for: [Self.pair], now: now).unansweredConsumptionRequests[Self.pair]?.count == 3, "the gauge counts the same rows")
        }
    }

    @Test func anAnswerSentAnswersEveryRowOfItsTransactionAndOneNotSentAnswersNone() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            let now = Date()
            try await Self.request(client, transaction: "3001", deadline: now.addingTimeInterval(3_600))
            try await Self.request(client, transaction: "3001", deadline: now.addingTimeInterval(7_200))
            try await Self.request(client, transaction: "3002", deadline: now.addingTimeInterval(3_600))
            let skipped = try await store.recordConsumptionAnswer(.init(transactionId: "3002", outcome: "no_facts"), pair: Self.pair, runId: nil)
            #expect(skipped.answered == 0)
            let sent = try await store.recordConsumptionAnswer(
                .init(transactionId: "3001", outcome: "sent", sent: #"{"customerConsented":true}"#, appleStatus: 202), pair: Self.pair, runId: UUID()
            )
            #expect(sent.answered == 2)
            #expect(try await store.openRefundRequests(pair: Self.pair, now: now).map(\.transactionId) == ["3002"])
            let kept = try await store.consumptionAnswers(pair: Self.pair, transactionId: "3001")
            #expect(kept.map(\.row.outcome) == ["sent"])
            #expect(kept.first?.row.appleStatus == 202)
            #expect(kept.first?.row.sent == #"{"customerConsented": true}"#, "kept as jsonb")
        }
    }

    @Test func aRequestApplesDecisionFollowedIsNotOpenNorAlertedNorAnsweredByASentAnswer() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            let now = Date()
            let request = UUID()
            try await client.query(
                """
                INSERT INTO app_store.consumption_requests (notification_uuid, environment, bundle_id, original_transaction_id, transaction_id, sent_date, deadline_date)
                VALUES (\(request), 'Sandbox', \(Self.pair.bundleId), '1000', '4001', \(now.addingTimeInterval(-3_600)), \(now.addingTimeInterval(39_600)));
                """,
                logger: TestDatabase.logger
            )
            try await client.query(
                """
                INSERT INTO app_store.refund_request_events (notification_uuid, kind, bundle_id, environment, transaction_id, signed_date)
                VALUES (\(request), 'request', \(Self.pair.bundleId), 'Sandbox', '4001', \(now.addingTimeInterval(-3_600))),
                    (\(UUID()), 'decision', \(Self.pair.bundleId), 'Sandbox', '4001', \(now.addingTimeInterval(-60)))
                """,
                logger: TestDatabase.logger
            )
            #expect(try await store.openRefundRequests(pair: Self.pair, now: now).isEmpty, "Apple refunded or declined it: nothing to answer")
            #expect(try await store.gauges(for: [Self.pair], now: now).unansweredConsumptionRequests[Self.pair] == nil, "and no deadline alert for it")
            let sent = try await store.recordConsumptionAnswer(.init(transactionId: "4001", outcome: "sent", appleStatus: 202), pair: Self.pair, runId: nil)
            #expect(sent.answered == 0, "a decided episode's row is not marked answered by the tool")
        }
    }

    @Test func theRowWrittenBeforeSendingIsReplacedByApplesAnswer() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            let now = Date()
            try await Self.request(client, transaction: "5001", deadline: now.addingTimeInterval(3_600))
            let before = try await store.recordConsumptionAnswer(
                .init(transactionId: "5001", outcome: "failed", detail: "sending", sent: #"{"customerConsented":true}"#), pair: Self.pair, runId: nil
            )
            #expect(before.answered == 0)
            let id = try #require(before.id)
            let after = try await store.recordConsumptionAnswer(
                .init(transactionId: "5001", outcome: "sent", sent: #"{"customerConsented":true}"#, appleStatus: 202), pair: Self.pair, runId: nil, replacing: id
            )
            #expect(after.id == id)
            #expect(after.answered == 1)
            let kept = try await store.consumptionAnswers(pair: Self.pair, transactionId: "5001")
            #expect(kept.map(\.row.outcome) == ["sent"], "one row: the trace written before sending, now Apple's answer")
        }
    }
}
