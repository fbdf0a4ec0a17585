import Foundation
import Logging
import PostgresNIO

/// A recovered notification waiting to be delivered to a target (`app_store.deliveries`).
package struct PendingDelivery: Sendable, Hashable {
    package var notificationUUID: UUID
    package var signedDate: Date
    /// The notification's original JWS, as Apple signed it.
    package var signedPayload: String
    package var attempts: Int
}

/// Another process is delivering to the same target.
package struct DeliveryInProgress: Error, CustomStringConvertible {
    package var target: String
    package var description: String { "another process is delivering to this handler" }
}

extension LedgerStore {
    /// Up to `limit` deliveries to `target` not yet delivered, in `signedDate` order (then by
    /// notificationUUID), after `cursor`.
    package func pendingDeliveries(to target: String, after cursor: (Date, UUID)?, limit: Int) async throws -> [PendingDelivery] {
        // The cursor's time in UNIX ms, Apple's precision and the stored one: a Date sent back
        // as is may come out a microsecond early and fetch the cursor's row again.
        let afterMilliseconds = cursor?.0.unixMilliseconds ?? 0
        let afterUUID = cursor?.1 ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        let rows = try await client.query(
            """
            SELECT d.notification_uuid, n.signed_date, n.signed_payload, d.attempts
            FROM app_store.deliveries d JOIN app_store.notifications n USING (notification_uuid)
            WHERE d.target = \(target) AND d.delivered_at IS NULL AND (NOT \(cursor != nil)
                OR (n.signed_date, d.notification_uuid) > (timestamptz 'epoch' + \(afterMilliseconds) * interval '1 millisecond', \(afterUUID)))
            ORDER BY n.signed_date, d.notification_uuid LIMIT \(limit)
            """,
            logger: logger
        )
        var found: [PendingDelivery] = []
        for try await (uuid, signed, payload, attempts) in rows.decode((UUID, Date, String, Int).self) {
            found.append(PendingDelivery(notificationUUID: uuid, signedDate: signed, signedPayload: payload, attempts: attempts))
        }
        return found
    }

    /// The deliveries to `target` not yet delivered: notificationUUID and signedDate, in order.
    package func pendingDeliveryList(to target: String) async throws -> [(uuid: UUID, signedDate: Date)] {
        let rows = try await client.query(
            """
            SELECT d.notification_uuid, n.signed_date
            FROM app_store.deliveries d JOIN app_store.notifications n USING (notification_uuid)
            WHERE d.target = \(target) AND d.delivered_at IS NULL ORDER BY n.signed_date, d.notification_uuid
            """,
            logger: logger
        )
        var found: [(uuid: UUID, signedDate: Date)] = []
        for try await (uuid, signed) in rows.decode((UUID, Date).self) { found.append((uuid, signed)) }
        return found
    }

    /// Whether the delivery is still pending (read just before its POST).
    package func deliveryIsPending(_ uuid: UUID, to target: String) async throws -> Bool {
        let rows = try await client.query(
            "SELECT delivered_at IS NULL FROM app_store.deliveries WHERE target = \(target) AND notification_uuid = \(uuid)", logger: logger
        )
        for try await pending in rows.decode(Bool.self) { return pending }
        return false
    }

    /// How many deliveries to `target` are not yet delivered.
    package func pendingDeliveryCount(to target: String) async throws -> Int {
        let rows = try await client.query(
            "SELECT count(*) FROM app_store.deliveries WHERE target = \(target) AND delivered_at IS NULL", logger: logger
        )
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// Records one attempt's answer (`status` nil: none came; `error`: why): delivered when
    /// `delivered`, which then never goes to the target again. Committed before the next attempt.
    package func recordDeliveryAttempt(
        _ uuid: UUID, to target: String, status: Int?, error: String?, delivered: Bool
    ) async throws {
        try await client.query(
            """
            UPDATE app_store.deliveries SET attempts = attempts + 1, last_status = \(status.map(Int32.init(clamping:))),
                last_error = \(error), last_attempt_at = now(), delivered_at = CASE WHEN \(delivered) THEN now() END
            WHERE target = \(target) AND notification_uuid = \(uuid) AND delivered_at IS NULL
            """,
            logger: logger
        )
    }

    /// Runs `body` holding the target's delivery lock (a session advisory lock on a connection
    /// held for the purpose, released if this process dies): one deliverer per target, so that
    /// two never send the same notification at once. Throws `DeliveryInProgress` when held.
    package func withDeliveryLock<Result: Sendable>(target: String, _ body: () async throws -> Result) async throws -> Result {
        let logger = self.logger
        return try await client.withConnection { connection in
            var acquired = false
            for try await value in try await connection.query(
                "SELECT pg_try_advisory_lock(hashtext('appstore-reconcile.deliveries'), hashtext(\(target)))", logger: logger
            ).decode(Bool.self) {
                acquired = value
            }
            guard acquired else { throw DeliveryInProgress(target: target) }
            do {
                let result = try await body()
                _ = try? await connection.query("SELECT pg_advisory_unlock(hashtext('appstore-reconcile.deliveries'), hashtext(\(target)))", logger: logger)
                return result
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(hashtext('appstore-reconcile.deliveries'), hashtext(\(target)))", logger: logger)
                throw error
            }
        }
    }
}
