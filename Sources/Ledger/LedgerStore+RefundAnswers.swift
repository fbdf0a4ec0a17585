package import Foundation
import LedgerModel
import Logging
import PostgresNIO
package import SignedData

/// The refund requests still to answer, and the answers the tool gives them (migration 0024).
extension LedgerStore {
    /// The open refund requests of `pair` at `now`, soonest deadline first: rows of
    /// app_store.consumption_requests not answered, their deadline ahead, and no decision of
    /// Apple's (REFUND, REFUND_DECLINED) signed at or after their request (an episode Apple
    /// decided needs no answer; migration 0022 keeps one row per episode).
    package func openRefundRequests(pair: AppStorePair, now: Date) async throws -> [OpenRefundRequest] {
        let rows = try await client.query(
            """
            SELECT o.*, coalesce(last.unknown, false) FROM (
                SELECT c.transaction_id, min(c.original_transaction_id),
                    (array_agg(c.app_account_token) FILTER (WHERE c.app_account_token IS NOT NULL))[1],
                    min(c.product_id), min(t.product_type), min(c.deadline_date) AS deadline, min(coalesce(r.signed_date, c.sent_date)), count(*)::integer,
                    min(t.in_app_ownership_type),
                    coalesce(bool_or(jsonb_typeof(app_store.jws_payload(coalesce(t.signed_transaction, app_store.jws_text(t.signed_transaction_key)))
                        -> 'advancedCommerceInfo') = 'object'), false)
                FROM app_store.consumption_requests c
                LEFT JOIN app_store.refund_request_events r ON r.notification_uuid = c.notification_uuid
                LEFT JOIN app_store.transaction_rows t
                    ON t.bundle_id = c.bundle_id AND t.environment = c.environment AND t.transaction_id = c.transaction_id
                WHERE c.bundle_id = \(pair.bundleId) AND c.environment = \(pair.environment.rawValue)
                    AND c.answered_date IS NULL AND c.deadline_date > \(now) AND c.transaction_id IS NOT NULL
                    AND \(unescaped: Self.undecided)
                GROUP BY c.transaction_id
            ) o
            LEFT JOIN LATERAL (
                -- The last answer: sent, no reply (outcome failed, a body, no status), and no request since.
                SELECT a.outcome = 'failed' AND a.sent IS NOT NULL AND a.apple_status IS NULL AND NOT EXISTS (
                        SELECT 1 FROM app_store.refund_request_events q
                        WHERE q.kind = 'request' AND q.bundle_id = a.bundle_id AND q.environment = a.environment
                            AND q.transaction_id = a.transaction_id AND q.signed_date > a.answered_at
                    ) AS unknown
                FROM app_store.consumption_answers a
                WHERE a.bundle_id = \(pair.bundleId) AND a.environment = \(pair.environment.rawValue) AND a.transaction_id = o.transaction_id
                ORDER BY a.answered_at DESC, a.id DESC LIMIT 1
            ) last ON true
            ORDER BY o.deadline, o.transaction_id
            """,
            logger: logger
        )
        var open: [OpenRefundRequest] = []
        for try await (transactionId, original, token, product, type, deadline, signed, count, ownership, advancedCommerce, awaiting) in rows.decode(
            (String, String, UUID?, String?, String?, Date, Date, Int32, String?, Bool, Bool).self
        ) {
            var request = OpenRefundRequest(
                transactionId: transactionId, originalTransactionId: original, appAccountToken: token, productId: product, productType: type,
                deadline: deadline, signedDate: signed, rows: Int(count), awaitingApple: awaiting
            )
            request.ownershipType = ownership
            request.advancedCommerce = advancedCommerce
            open.append(request)
        }
        return open
    }

    /// A row `c` of app_store.consumption_requests that Apple has not decided: no REFUND or
    /// REFUND_DECLINED of its transaction signed at or after its request (one signed in the same
    /// millisecond counts after it, as `settle_consumption_requests` orders them). A row whose
    /// request has no event (recorded before migration 0022) counts from its sent_date.
    static let undecided = """
        NOT EXISTS (
            SELECT 1 FROM app_store.refund_request_events d
            WHERE d.kind = 'decision' AND d.bundle_id = c.bundle_id AND d.environment = c.environment AND d.transaction_id = c.transaction_id
                AND d.signed_date >= coalesce((SELECT e.signed_date FROM app_store.refund_request_events e WHERE e.notification_uuid = c.notification_uuid), c.sent_date)
        )
        """

    /// Of `transactions`, those with a request already answered that Apple has not decided: a
    /// request recorded now for one of them joins the answered one (migration 0022), so a dry run
    /// must not list it as one to answer.
    package func answeredRefundRequests(pair: AppStorePair, transactions: [String]) async throws -> Set<String> {
        guard !transactions.isEmpty else { return [] }
        let rows = try await client.query(
            """
            SELECT DISTINCT c.transaction_id FROM app_store.consumption_requests c
            WHERE c.bundle_id = \(pair.bundleId) AND c.environment = \(pair.environment.rawValue) AND c.transaction_id = ANY(\(transactions)::text[])
                AND c.answered_date IS NOT NULL AND \(unescaped: Self.undecided)
            """,
            logger: logger
        )
        var found: Set<String> = []
        for try await id in rows.decode(String.self) { found.insert(id) }
        return found
    }

    /// Records what the tool did about one request, a new row of app_store.consumption_answers,
    /// or the row `replacing` names (the one written before sending). One that was `sent` is
    /// answered: every unanswered row of its transaction's undecided requests gets
    /// `answered_date`, in the same statement. Returns the id of the answer's row and the
    /// requests' rows answered (the id nil only when the row `replacing` names is gone).
    @discardableResult
    package func recordConsumptionAnswer(
        _ answer: ConsumptionAnswerRecord, pair: AppStorePair, runId: UUID?, replacing: Int64? = nil
    ) async throws -> (id: Int64?, answered: Int) {
        let rows = try await client.query(
            """
            WITH input AS (
                SELECT \(pair.bundleId)::text AS bundle_id, \(pair.environment.rawValue)::text AS environment, \(answer.transactionId)::text AS transaction_id,
                    \(answer.outcome)::text AS outcome, \(answer.detail)::text AS detail, \(answer.sent)::jsonb AS sent, \(answer.appleStatus)::integer AS apple_status,
                    \(answer.appleError)::bigint AS apple_error, \(runId)::uuid AS run_id, \(replacing)::bigint AS replacing
            ), inserted AS (
                INSERT INTO app_store.consumption_answers (bundle_id, environment, transaction_id, outcome, detail, sent, apple_status, apple_error, run_id)
                SELECT bundle_id, environment, transaction_id, outcome, detail, sent, apple_status, apple_error, run_id FROM input WHERE replacing IS NULL
                RETURNING id, outcome
            ), updated AS (
                UPDATE app_store.consumption_answers a SET outcome = i.outcome, detail = i.detail, sent = i.sent, apple_status = i.apple_status,
                    apple_error = i.apple_error, answered_at = now()
                FROM input i
                WHERE a.id = i.replacing AND a.bundle_id = i.bundle_id AND a.environment = i.environment
                RETURNING a.id, a.outcome
            ), answer AS (
                SELECT * FROM inserted UNION ALL SELECT * FROM updated
            ), answered AS (
                UPDATE app_store.consumption_requests c SET answered_date = now()
                FROM input i
                WHERE c.bundle_id = i.bundle_id AND c.environment = i.environment AND c.transaction_id = i.transaction_id
                    AND c.answered_date IS NULL AND (SELECT outcome FROM answer) = 'sent'
                    AND \(unescaped: Self.undecided)
                RETURNING 1
            )
            SELECT (SELECT id FROM answer), (SELECT count(*)::integer FROM answered)
            """,
            logger: logger
        )
        var recorded: (id: Int64?, answered: Int) = (nil, 0)
        for try await (id, answered) in rows.decode((Int64?, Int32).self) { recorded = (id, Int(answered)) }
        return recorded
    }

    /// The answers recorded for one transaction's requests, oldest first: for support.
    package func consumptionAnswers(pair: AppStorePair, transactionId: String) async throws -> [(row: ConsumptionAnswerRecord, at: Date)] {
        let rows = try await client.query(
            """
            SELECT transaction_id, outcome, detail, sent::text, apple_status, apple_error, answered_at
            FROM app_store.consumption_answers
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND transaction_id = \(transactionId)
            ORDER BY answered_at, id
            """,
            logger: logger
        )
        var found: [(row: ConsumptionAnswerRecord, at: Date)] = []
        for try await (id, outcome, detail, sent, status, error, at) in rows.decode((String, String, String?, String?, Int32?, Int64?, Date).self) {
            found.append((ConsumptionAnswerRecord(transactionId: id, outcome: outcome, detail: detail, sent: sent, appleStatus: status.map(Int.init), appleError: error), at))
        }
        return found
    }
}
