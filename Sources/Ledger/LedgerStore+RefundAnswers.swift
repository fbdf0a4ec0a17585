import Foundation
import Logging
import PostgresNIO
import SignedData

/// The refund requests still to answer, and the answers the tool gives them (migration 0024).
extension LedgerStore {
    /// A refund request open for an answer: not answered, its deadline ahead. One per transaction
    /// (the rows of one transaction's repeated requests are one request), with what the facts
    /// query is given and the purchase's type as the ledger holds it.
    package struct OpenRefundRequest: Sendable, Hashable {
        package var transactionId: String
        package var originalTransactionId: String
        package var appAccountToken: UUID?
        package var productId: String?
        /// The transaction's `product_type` in the ledger (nil: the ledger does not hold it).
        package var productType: String?
        /// The soonest deadline of its rows.
        package var deadline: Date
        /// Its rows in app_store.consumption_requests.
        package var rows: Int
    }

    /// The open refund requests of `pair` at `now`, soonest deadline first.
    package func openRefundRequests(pair: AppStorePair, now: Date) async throws -> [OpenRefundRequest] {
        let rows = try await client.query(
            """
            SELECT c.transaction_id, min(c.original_transaction_id),
                (array_agg(c.app_account_token) FILTER (WHERE c.app_account_token IS NOT NULL))[1],
                min(c.product_id), min(t.product_type), min(c.deadline_date), count(*)::integer
            FROM app_store.consumption_requests c
            LEFT JOIN app_store.transaction_rows t
                ON t.bundle_id = c.bundle_id AND t.environment = c.environment AND t.transaction_id = c.transaction_id
            WHERE c.bundle_id = \(pair.bundleId) AND c.environment = \(pair.environment.rawValue)
                AND c.answered_date IS NULL AND c.deadline_date > \(now) AND c.transaction_id IS NOT NULL
            GROUP BY c.transaction_id
            ORDER BY min(c.deadline_date), c.transaction_id
            """,
            logger: logger
        )
        var open: [OpenRefundRequest] = []
        for try await (transactionId, original, token, product, type, deadline, count) in rows.decode((String, String, UUID?, String?, String?, Date, Int32).self) {
            open.append(
                OpenRefundRequest(
                    transactionId: transactionId, originalTransactionId: original, appAccountToken: token, productId: product, productType: type,
                    deadline: deadline, rows: Int(count)
                )
            )
        }
        return open
    }

    /// What the tool did about one refund request, as app_store.consumption_answers keeps it.
    package struct ConsumptionAnswerRow: Sendable, Hashable {
        package var transactionId: String
        /// sent, no_facts, no_consent, invalid, failed.
        package var outcome: String
        package var detail: String?
        /// The body sent to Apple, as JSON.
        package var sent: String?
        package var appleStatus: Int?
        package var appleError: Int64?

        package init(transactionId: String, outcome: String, detail: String? = nil, sent: String? = nil, appleStatus: Int? = nil, appleError: Int64? = nil) {
            self.transactionId = transactionId
            self.outcome = outcome
            self.detail = detail
            self.sent = sent
            self.appleStatus = appleStatus
            self.appleError = appleError
        }
    }

    /// Records what the tool did about one request; one that was `sent` is answered: every
    /// unanswered row of its transaction's requests gets `answered_date`, in the same statement.
    /// Returns the rows answered.
    @discardableResult
    package func recordConsumptionAnswer(_ answer: ConsumptionAnswerRow, pair: AppStorePair, runId: UUID?) async throws -> Int {
        let rows = try await client.query(
            """
            WITH answer AS (
                INSERT INTO app_store.consumption_answers (bundle_id, environment, transaction_id, outcome, detail, sent, apple_status, apple_error, run_id)
                VALUES (\(pair.bundleId), \(pair.environment.rawValue), \(answer.transactionId), \(answer.outcome), \(answer.detail),
                    \(answer.sent)::jsonb, \(answer.appleStatus), \(answer.appleError), \(runId))
                RETURNING outcome
            )
            UPDATE app_store.consumption_requests SET answered_date = now()
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND transaction_id = \(answer.transactionId)
                AND answered_date IS NULL AND (SELECT outcome FROM answer) = 'sent'
            RETURNING 1
            """,
            logger: logger
        )
        var answered = 0
        for try await _ in rows { answered += 1 }
        return answered
    }

    /// The answers recorded for one transaction's requests, oldest first: for support.
    package func consumptionAnswers(pair: AppStorePair, transactionId: String) async throws -> [(row: ConsumptionAnswerRow, at: Date)] {
        let rows = try await client.query(
            """
            SELECT transaction_id, outcome, detail, sent::text, apple_status, apple_error, answered_at
            FROM app_store.consumption_answers
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND transaction_id = \(transactionId)
            ORDER BY answered_at, id
            """,
            logger: logger
        )
        var found: [(row: ConsumptionAnswerRow, at: Date)] = []
        for try await (id, outcome, detail, sent, status, error, at) in rows.decode((String, String, String?, String?, Int32?, Int64?, Date).self) {
            found.append((ConsumptionAnswerRow(transactionId: id, outcome: outcome, detail: detail, sent: sent, appleStatus: status.map(Int.init), appleError: error), at))
        }
        return found
    }
}
