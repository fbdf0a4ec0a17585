package import FailureKind
package import Foundation
import Ledger
import Logging
package import PostgresNIO

/// `prune --signed-older-than`: drops the stored JWS of notifications signed before a time, in
/// batches of one short transaction each (`app_store.prune_signed_payloads`, migration 0021),
/// keeping each row's decoded columns and the SHA-256 of the JWS Apple sent.
///
/// It holds `migrate`'s advisory lock while it works and will not start while rows written before
/// 0021 are still being converted: a conversion may make a transaction row point at an object a
/// prune is about to delete as unused.
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

    /// Why a prune did not start: run it again later.
    package struct Refused: KindedFailure, Hashable {
        package var reason: String
        package var failureKind: FailureKind { .temporary }
        package var description: String { "prune did not start: \(reason)" }
    }

    /// How many notifications signed before the time still keep their JWS (and are not waiting to
    /// be delivered to a handler).
    package func pending(_ client: PostgresClient, logger: Logger) async throws -> Int {
        let rows = try await client.query(
            """
            SELECT count(*) FROM app_store.notification_rows n
            WHERE n.signed_date < \(signedBefore) AND n.signed_payload_pruned_at IS NULL
                AND NOT EXISTS (SELECT 1 FROM app_store.deliveries d WHERE d.notification_uuid = n.notification_uuid AND d.delivered_at IS NULL)
            """,
            logger: logger
        )
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    package func run(_ client: PostgresClient, logger: Logger) async throws -> Outcome {
        try await client.withConnection { connection in
            let locked = try await connection.query("SELECT pg_try_advisory_lock(\(Migrator.lockKey))", logger: logger)
                .collect().first?.decode(Bool.self) ?? false
            guard locked else { throw Refused(reason: "a migrate is running; run prune again after it") }
            do {
                let outcome = try await prune(on: connection, logger: logger)
                _ = try await connection.query("SELECT pg_advisory_unlock(\(Migrator.lockKey))", logger: logger)
                return outcome
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(Migrator.lockKey))", logger: logger)
                throw error
            }
        }
    }

    private func prune(on connection: PostgresConnection, logger: Logger) async throws -> Outcome {
        let converting = try await connection.query(
            "SELECT count(*) FROM app_store.signed_object_conversion WHERE finished_at IS NULL", logger: logger
        ).collect().first?.decode(Int.self) ?? 0
        guard converting == 0 else { throw Refused(reason: "rows written before migration 0021 are still being converted; run migrate first") }
        var outcome = Outcome()
        // The cursor's time as PostgreSQL's own text: a Date would round it to the microsecond below.
        var cursor: (String, UUID)?
        while true {
            let rows = try await connection.query(
                """
                SELECT pruned, last_date::text, last_uuid
                FROM app_store.prune_signed_payloads(\(signedBefore), \(cursor?.0)::timestamptz, \(cursor?.1), \(batch))
                """,
                logger: logger
            )
            var next: (String, UUID)?
            for try await (pruned, date, uuid) in rows.decode((Int, String?, UUID?).self) {
                outcome.pruned += pruned
                if let date, let uuid { next = (date, uuid) }
            }
            guard let next else { return outcome }
            outcome.batches += 1
            cursor = next
        }
    }
}
