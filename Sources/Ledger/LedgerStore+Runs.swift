package import Foundation
import Logging
import PostgresNIO
package import SignedData

/// Runs: their records (start, abandon, finish) and the subscriptions each changed.
extension LedgerStore {
    // MARK: Runs

    package func startRun(kind: RunKind, pair: AppStorePair, windowStart: Date?, windowEnd: Date?, shard: String? = nil) async throws -> UUID {
        let id = UUID()
        let host = ProcessInfo.processInfo.hostName
        let pid = Int(ProcessInfo.processInfo.processIdentifier)
        try await client.query(
            """
            INSERT INTO app_store.runs (run_id, kind, bundle_id, environment, window_start, window_end, dry_run, host, pid, shard)
            VALUES (\(id), \(kind.rawValue), \(pair.bundleId), \(pair.environment.rawValue), \(windowStart), \(windowEnd), false, \(host), \(pid), \(shard))
            """,
            logger: logger
        )
        return id
    }

    /// Marks `abandoned` the recovering runs of this App Store and shard still recorded as running: called by a
    /// run that holds the shard's run lock, so their processes are gone (killed, machine lost).
    @discardableResult
    package func abandonDeadRuns(pair: AppStorePair, kinds: [RunKind] = [.run, .nightly], shard: String?) async throws -> Int {
        let rows = try await client.query(
            """
            UPDATE app_store.runs SET outcome = 'abandoned', finished_at = now()
            WHERE outcome = 'running' AND bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue)
              AND kind = ANY(\(kinds.map(\.rawValue))) AND shard IS NOT DISTINCT FROM \(shard)
            RETURNING run_id
            """,
            logger: logger
        )
        var count = 0
        for try await _ in rows.decode(UUID.self) { count += 1 }
        return count
    }

    /// Records how a run ended; `counts` is its summary as a JSON object.
    package func finishRun(_ id: UUID, outcome: RunOutcome, countsJSON: String) async throws {
        try await client.query(
            """
            UPDATE app_store.runs SET finished_at = now(), outcome = \(outcome.rawValue), counts = \(countsJSON)::jsonb
            WHERE run_id = \(id)
            """,
            logger: logger
        )
    }

    /// Up to `limit` of the subscriptions a run changed, after `cursor`, in order of
    /// originalTransactionId: before the run first changed each (nil: none) and as it left it.
    package func subscriptionChanges(ofRun runId: UUID, after cursor: String?, limit: Int) async throws
        -> [(customer: String, before: SubscriptionRecord?, after: SubscriptionRecord)]
    {
        let rows = try await client.query(
            """
            SELECT c.original_transaction_id, b.original_transaction_id IS NOT NULL,
                \(unescaped: SubscriptionRecord.values(from: "b")), \(unescaped: SubscriptionRecord.values(from: "a"))
            FROM app_store.run_subscription_changes c
            LEFT JOIN LATERAL jsonb_to_record(c.before) AS b(\(unescaped: SubscriptionRecord.recordsetTypes)) ON true
            CROSS JOIN LATERAL jsonb_to_record(c.after) AS a(\(unescaped: SubscriptionRecord.recordsetTypes))
            WHERE c.run_id = \(runId) AND c.original_transaction_id > \(cursor ?? "") ORDER BY c.original_transaction_id LIMIT \(limit)
            """,
            logger: logger
        )
        let width = SubscriptionRecord.columns.count
        var found: [(customer: String, before: SubscriptionRecord?, after: SubscriptionRecord)] = []
        for try await row in rows {
            let cells = Array(row)
            let before = try cells[1].decode(Bool.self) ? try SubscriptionRecord.read(cells, from: 2) : nil
            found.append((try cells[0].decode(String.self), before, try SubscriptionRecord.read(cells, from: 2 + width)))
        }
        return found
    }
}
