package import Foundation
package import Logging
package import PostgresNIO

/// `prune --outbox-older-than`: deletes the outbox's rows created before a time, in batches of
/// short transactions. Debezium's outbox router ignores deletes; a slot that has not read a row
/// yet still has it in the WAL it holds.
package struct OutboxPruning: Sendable {
    package var createdBefore: Date
    package var batch: Int

    package init(createdBefore: Date, batch: Int = 10_000) {
        self.createdBefore = createdBefore
        self.batch = batch
    }

    /// How many rows a run would delete.
    package func pending(_ client: PostgresClient, logger: Logger) async throws -> Int {
        let rows = try await client.query("SELECT count(*) FROM app_store.outbox WHERE created_at < \(createdBefore)", logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// Deletes them; returns how many.
    package func run(_ client: PostgresClient, logger: Logger) async throws -> Int {
        var deleted = 0
        while true {
            let rows = try await client.query(
                """
                WITH gone AS (
                    DELETE FROM app_store.outbox WHERE id IN (
                        SELECT id FROM app_store.outbox WHERE created_at < \(createdBefore) ORDER BY created_at LIMIT \(batch))
                    RETURNING 1)
                SELECT count(*) FROM gone
                """,
                logger: logger
            )
            var count = 0
            for try await n in rows.decode(Int.self) { count = n }
            deleted += count
            if count < batch { return deleted }
        }
    }
}
