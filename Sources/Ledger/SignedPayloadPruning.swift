import Foundation
import Logging
import PostgresNIO

/// `prune --signed-older-than`: drops the stored JWS of notifications signed before a time, in
/// batches of one short transaction each (`app_store.prune_signed_payloads`, migration 0021),
/// keeping each row's decoded columns and the SHA-256 of the JWS Apple sent.
package struct SignedPayloadPruning: Sendable {
    package var signedBefore: Date
    package var batch: Int32

    package init(signedBefore: Date, batch: Int32 = 1_000) {
        self.signedBefore = signedBefore
        self.batch = batch
    }

    package struct Outcome: Hashable, Sendable {
        package var pruned = 0
        package var batches = 0
    }

    /// How many notifications signed before the time still keep their JWS.
    package func pending(_ client: PostgresClient, logger: Logger) async throws -> Int {
        let rows = try await client.query(
            """
            SELECT count(*) FROM app_store.notification_rows
            WHERE signed_date < \(signedBefore) AND signed_payload_pruned_at IS NULL
                AND NOT EXISTS (SELECT 1 FROM app_store.deliveries d WHERE d.notification_uuid = notification_rows.notification_uuid AND d.delivered_at IS NULL)
            """,
            logger: logger
        )
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    package func run(_ client: PostgresClient, logger: Logger) async throws -> Outcome {
        var outcome = Outcome()
        var cursor: (Date, UUID)?
        while true {
            let rows = try await client.query(
                """
                SELECT pruned, last_date, last_uuid
                FROM app_store.prune_signed_payloads(\(signedBefore), \(cursor?.0), \(cursor?.1), \(batch))
                """,
                logger: logger
            )
            var next: (Date, UUID)?
            for try await (pruned, date, uuid) in rows.decode((Int, Date?, UUID?).self) {
                outcome.pruned += pruned
                if let date, let uuid { next = (date, uuid) }
            }
            guard let next else { return outcome }
            outcome.batches += 1
            cursor = next
        }
    }
}
