package import Foundation
import Logging
import PostgresNIO
package import SignedData

extension LedgerStore {
    /// The checkpoints an unfinished run of this scope left, by query key. When the run that
    /// wrote them finished (its pass 1 row outlives it, for other shards to see), this is a new
    /// run of a window done before: its checkpoints are forgotten and it starts over.
    package func resumableCheckpoints(in scope: CheckpointScope) async throws -> [String: QueryCheckpoint] {
        let rows = try await client.query(
            """
            SELECT count(*) FROM app_store.run_checkpoints c JOIN app_store.runs r ON r.run_id = c.run_id
            WHERE c.bundle_id = \(scope.pair.bundleId) AND c.environment = \(scope.pair.environment.rawValue) AND c.window_start = \(scope.windowStart) AND c.window_end = \(scope.windowEnd)
              AND c.only_failures = \(scope.onlyFailures) AND c.shard = \(scope.shard)
              AND r.outcome IN ('succeeded', 'succeeded_with_rejections')
            """,
            logger: logger
        )
        var finished = 0
        for try await count in rows.decode(Int.self) { finished = count }
        if finished > 0 {
            try await clearCheckpoints(in: scope, keepingPassOne: false)
            return [:]
        }
        return try await checkpoints(in: scope)
    }

    /// The checkpoints of this scope, by query key.
    package func checkpoints(in scope: CheckpointScope) async throws -> [String: QueryCheckpoint] {
        let rows = try await client.query(
            """
            SELECT query, position, pagination_token, completed, run_id FROM app_store.run_checkpoints
            WHERE bundle_id = \(scope.pair.bundleId) AND environment = \(scope.pair.environment.rawValue) AND window_start = \(scope.windowStart) AND window_end = \(scope.windowEnd)
              AND only_failures = \(scope.onlyFailures) AND shard = \(scope.shard)
            """,
            logger: logger
        )
        var found: [String: QueryCheckpoint] = [:]
        for try await (query, position, token, completed, runId) in rows.decode((String, Int, String?, Bool, UUID?).self) {
            found[query] = QueryCheckpoint(query: query, position: position, paginationToken: token, completed: completed, runId: runId)
        }
        return found
    }

    /// Records a checkpoint on its own (a batch's checkpoint goes with the batch: `apply`).
    package func saveCheckpoint(_ checkpoint: QueryCheckpoint, in scope: CheckpointScope, runId: UUID?) async throws {
        try await client.withConnection { connection in
            try await Self.upsert(checkpoint, in: scope, runId: runId, on: connection, logger: logger)
        }
    }

    static func upsert(_ checkpoint: QueryCheckpoint, in scope: CheckpointScope, runId: UUID?, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            """
            INSERT INTO app_store.run_checkpoints (bundle_id, environment, window_start, window_end, only_failures, shard, query, position,
                pagination_token, completed, run_id)
            VALUES (\(scope.pair.bundleId), \(scope.pair.environment.rawValue), \(scope.windowStart), \(scope.windowEnd), \(scope.onlyFailures), \(scope.shard),
                \(checkpoint.query), \(checkpoint.position), \(checkpoint.paginationToken), \(checkpoint.completed), \(runId))
            ON CONFLICT (bundle_id, environment, window_start, window_end, only_failures, shard, query) DO UPDATE SET
                position = EXCLUDED.position, pagination_token = EXCLUDED.pagination_token, completed = EXCLUDED.completed,
                run_id = EXCLUDED.run_id, updated_at = now()
            """,
            logger: logger
        )
    }

    /// Forgets the checkpoints of a scope: its run finished. The pass 1 row may stay, for the
    /// other shards of the window waiting on it.
    package func clearCheckpoints(in scope: CheckpointScope, keepingPassOne: Bool) async throws {
        try await client.query(
            """
            DELETE FROM app_store.run_checkpoints
            WHERE bundle_id = \(scope.pair.bundleId) AND environment = \(scope.pair.environment.rawValue) AND window_start = \(scope.windowStart) AND window_end = \(scope.windowEnd)
              AND only_failures = \(scope.onlyFailures) AND shard = \(scope.shard)
              AND NOT (\(keepingPassOne) AND query = \(QueryCheckpoint.passOneKey))
            """,
            logger: logger
        )
    }

    /// The shards ("INDEX/COUNT") of this window whose pass 1 is recorded done, finished runs' included.
    package func shardsWithPassOneDone(pair: AppStorePair, windowStart: Date, windowEnd: Date, onlyFailures: Bool) async throws -> Set<String> {
        let rows = try await client.query(
            """
            SELECT shard FROM app_store.run_checkpoints
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND window_start = \(windowStart) AND window_end = \(windowEnd)
              AND only_failures = \(onlyFailures) AND query = \(QueryCheckpoint.passOneKey) AND completed
            """,
            logger: logger
        )
        var found: Set<String> = []
        for try await shard in rows.decode(String.self) { found.insert(shard) }
        return found
    }
}

extension LedgerStore {
    /// A payload an earlier run rejected: what a run resuming it reports again.
    package struct EarlierRejection: Sendable, Hashable {
        package var notificationUUID: String?
        package var reason: String
        package var detail: String
        /// The customer its unverified content named (nil: none, or not readable).
        package var unverifiedOriginalTransactionId: String?
        /// The whole payload, for a row written before migration 0016 recorded the customer it
        /// names: whoever resumes reads the name from it. Nil otherwise.
        package var payloadToRead: String?
    }

    /// The payloads these runs rejected, oldest first.
    package func rejections(ofRuns runIds: [UUID]) async throws -> [EarlierRejection] {
        guard !runIds.isEmpty else { return [] }
        let rows = try await client.query(
            """
            SELECT notification_uuid, reason, detail, unverified_original_transaction_id,
                CASE WHEN unverified_original_transaction_id IS NULL AND kept_whole AND rejected_at < m.applied_at THEN signed_payload END
            FROM app_store.rejected_payloads
            CROSS JOIN (SELECT coalesce(min(applied_at), '-infinity') AS applied_at FROM app_store.schema_migrations WHERE version = 16) AS m
            WHERE run_id = ANY(\(runIds)) ORDER BY rejection_id
            """,
            logger: logger
        )
        var found: [EarlierRejection] = []
        for try await (uuid, reason, detail, customer, payload) in rows.decode((String?, String, String, String?, String?).self) {
            found.append(
                EarlierRejection(notificationUUID: uuid, reason: reason, detail: detail, unverifiedOriginalTransactionId: customer, payloadToRead: payload))
        }
        return found
    }
}

extension LedgerStore {
    /// The window of the newest run of this kind, environment and shard ("INDEX/COUNT") that left
    /// checkpoints and did not finish.
    package func unfinishedWindow(kind: RunKind, pair: AppStorePair, shard: String) async throws -> (start: Date, end: Date)? {
        let rows = try await client.query(
            """
            SELECT c.window_start, c.window_end FROM app_store.run_checkpoints c JOIN app_store.runs r ON r.run_id = c.run_id
            WHERE r.kind = \(kind.rawValue) AND c.bundle_id = \(pair.bundleId) AND c.environment = \(pair.environment.rawValue) AND c.shard = \(shard)
              AND r.outcome NOT IN ('succeeded', 'succeeded_with_rejections')
            ORDER BY c.updated_at DESC LIMIT 1
            """,
            logger: logger
        )
        for try await (start, end) in rows.decode((Date, Date).self) { return (start, end) }
        return nil
    }
}

extension LedgerStore {
    /// Deletes the rejected payloads not seen for `days` days (by `last_rejected_at`), ten
    /// thousand rows a statement so that no lock is held long; how many were deleted.
    package func pruneRejectedPayloads(notSeenForDays days: Int) async throws -> Int {
        var deleted = 0
        while true {
            let rows = try await client.query(
                """
                WITH gone AS (
                    DELETE FROM app_store.rejected_payloads WHERE rejection_id IN (
                        SELECT rejection_id FROM app_store.rejected_payloads
                        WHERE last_rejected_at < now() - \(days) * interval '1 day' LIMIT 10000)
                    RETURNING 1)
                SELECT count(*) FROM gone
                """,
                logger: logger
            )
            var count = 0
            for try await value in rows.decode(Int.self) { count = value }
            deleted += count
            if count < 10_000 { return deleted }
        }
    }
}
