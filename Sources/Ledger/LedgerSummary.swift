import Logging
package import PostgresNIO

/// Row counts of the ledger's tables: what `demo` and `status` print.
package struct LedgerSummary: Hashable, Sendable, Codable {
    package var notificationsFromWebhook: Int
    package var notificationsFromHistory: Int
    package var transactions: Int
    package var subscriptions: Int
    package var activeSubscriptions: Int
    package var historyRevisions: Int
    package var runs: Int
    package var rejectedPayloads: Int

    package static func read(_ client: PostgresClient, logger: Logger) async throws -> LedgerSummary {
        let rows = try await client.query(
            """
            SELECT
              (SELECT count(*) FROM app_store.notifications WHERE source = 'webhook'),
              (SELECT count(*) FROM app_store.notifications WHERE source = 'history'),
              (SELECT count(*) FROM app_store.transactions),
              (SELECT count(*) FROM app_store.subscriptions),
              (SELECT count(*) FROM app_store.subscriptions WHERE status = 1),
              (SELECT count(*) FROM app_store.history_revisions),
              (SELECT count(*) FROM app_store.runs),
              (SELECT count(*) FROM app_store.rejected_payloads)
            """,
            logger: logger
        )
        for try await row in rows.decode((Int, Int, Int, Int, Int, Int, Int, Int).self) {
            return LedgerSummary(
                notificationsFromWebhook: row.0, notificationsFromHistory: row.1, transactions: row.2,
                subscriptions: row.3, activeSubscriptions: row.4, historyRevisions: row.5, runs: row.6,
                rejectedPayloads: row.7
            )
        }
        throw PostgresDecodingFailure()
    }
}

struct PostgresDecodingFailure: Error {}
