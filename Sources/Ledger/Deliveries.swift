package import Foundation
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

/// One delivery as `deliver --list` shows it.
package struct DeliveryListing: Sendable, Hashable {
    package var notificationUUID: UUID
    package var signedDate: Date
    package var attempts: Int
    package var lastStatus: Int?
    package var lastError: String?
    /// Parked after its attempts: sent again only by `deliver --retry-failed`.
    package var failed: Bool
}

/// Where the deliveries to one target stand (`app_store.deliveries`).
package struct DeliveryCounts: Sendable, Hashable {
    /// Not delivered, not parked: still sent.
    package var pending = 0
    /// Parked after their attempts.
    package var failed = 0

    package init(pending: Int = 0, failed: Int = 0) {
        self.pending = pending
        self.failed = failed
    }
}

extension LedgerStore {
    /// The deliveries to `target` still to send (not delivered, not parked), fewest attempts
    /// first, then in `signedDate` order: a notification that keeps failing waits behind the
    /// others. With `dueOnly`, only those whose pause after their last attempt is over
    /// (`deliveryDueAt`): `serve`'s forwarder goes by that.
    package func deliveryQueue(to target: String, dueOnly: Bool, limit: Int = 10_000) async throws -> [UUID] {
        let rows = try await client.query(
            """
            SELECT d.notification_uuid
            FROM app_store.deliveries d JOIN app_store.notifications n USING (notification_uuid)
            WHERE d.target = \(target) AND d.delivered_at IS NULL AND d.failed_at IS NULL
              AND (NOT \(dueOnly) OR d.last_attempt_at IS NULL OR \(unescaped: Self.deliveryDueAt) <= now())
            ORDER BY d.attempts, n.signed_date, d.notification_uuid LIMIT \(limit)
            """,
            logger: logger
        )
        var found: [UUID] = []
        for try await uuid in rows.decode(UUID.self) { found.append(uuid) }
        return found
    }

    /// When a delivery (`d`) that was refused is due again: 1 s after its first attempt, doubling
    /// with each (2 s, 4 s …), at most an hour. NULL when it was never tried.
    static let deliveryDueAt =
        "d.last_attempt_at + least(interval '1 second' * power(2, least(greatest(d.attempts - 1, 0), 20)), interval '1 hour')"

    /// How long until the next delivery to `target` is due (zero: one is due now); nil when
    /// nothing is left to send. (`greatest` skips a NULL: over no row it gave 0, "due now", and
    /// serve's forwarder looked again every 100 ms with nothing to send; the NULL is kept apart.)
    package func nextDeliveryDue(to target: String) async throws -> Duration? {
        let rows = try await client.query(
            """
            SELECT greatest(0, seconds) FROM (
                SELECT extract(epoch FROM min(coalesce(\(unescaped: Self.deliveryDueAt), now())) - now())::float8 AS seconds
                FROM app_store.deliveries d WHERE target = \(target) AND delivered_at IS NULL AND failed_at IS NULL
            ) next WHERE seconds IS NOT NULL
            """,
            logger: logger
        )
        for try await seconds in rows.decode(Double?.self) { return seconds.map { .milliseconds(Int64($0 * 1000)) } }
        return nil
    }

    /// The delivery, read just before its POST: nil when it was delivered or parked meanwhile.
    package func pendingDelivery(_ uuid: UUID, to target: String) async throws -> PendingDelivery? {
        let rows = try await client.query(
            """
            SELECT d.notification_uuid, n.signed_date, n.signed_payload, d.attempts
            FROM app_store.deliveries d JOIN app_store.notifications n USING (notification_uuid)
            WHERE d.target = \(target) AND d.notification_uuid = \(uuid) AND d.delivered_at IS NULL AND d.failed_at IS NULL
            """,
            logger: logger
        )
        for try await (uuid, signed, payload, attempts) in rows.decode((UUID, Date, String, Int).self) {
            return PendingDelivery(notificationUUID: uuid, signedDate: signed, signedPayload: payload, attempts: attempts)
        }
        return nil
    }

    /// The deliveries to `target` not yet delivered and not parked: notificationUUID and
    /// signedDate, in the order a run sends them.
    package func pendingDeliveryList(to target: String) async throws -> [(uuid: UUID, signedDate: Date)] {
        let rows = try await client.query(
            """
            SELECT d.notification_uuid, n.signed_date
            FROM app_store.deliveries d JOIN app_store.notifications n USING (notification_uuid)
            WHERE d.target = \(target) AND d.delivered_at IS NULL AND d.failed_at IS NULL
            ORDER BY d.attempts, n.signed_date, d.notification_uuid
            """,
            logger: logger
        )
        var found: [(uuid: UUID, signedDate: Date)] = []
        for try await (uuid, signed) in rows.decode((UUID, Date).self) { found.append((uuid, signed)) }
        return found
    }

    /// Every delivery to `target` not delivered (pending, then parked), with its last answer.
    package func deliveryListing(to target: String) async throws -> [DeliveryListing] {
        let rows = try await client.query(
            """
            SELECT d.notification_uuid, n.signed_date, d.attempts, d.last_status, d.last_error, d.failed_at IS NOT NULL
            FROM app_store.deliveries d JOIN app_store.notifications n USING (notification_uuid)
            WHERE d.target = \(target) AND d.delivered_at IS NULL
            ORDER BY d.failed_at IS NOT NULL, d.attempts, n.signed_date, d.notification_uuid
            """,
            logger: logger
        )
        var found: [DeliveryListing] = []
        for try await (uuid, signed, attempts, status, error, failed) in rows.decode((UUID, Date, Int, Int?, String?, Bool).self) {
            found.append(DeliveryListing(notificationUUID: uuid, signedDate: signed, attempts: attempts, lastStatus: status, lastError: error, failed: failed))
        }
        return found
    }

    /// How many deliveries to `target` are pending, and how many parked.
    package func deliveryCounts(to target: String) async throws -> DeliveryCounts {
        let rows = try await client.query(
            """
            SELECT count(*) FILTER (WHERE failed_at IS NULL), count(*) FILTER (WHERE failed_at IS NOT NULL)
            FROM app_store.deliveries WHERE target = \(target) AND delivered_at IS NULL
            """,
            logger: logger
        )
        for try await (pending, failed) in rows.decode((Int, Int).self) { return DeliveryCounts(pending: pending, failed: failed) }
        return DeliveryCounts()
    }

    /// How many deliveries to `target` are pending (not delivered, not parked).
    package func pendingDeliveryCount(to target: String) async throws -> Int {
        try await deliveryCounts(to: target).pending
    }

    /// Records one attempt's answer (`status` nil: none came; `error`: why): delivered when
    /// `delivered`, which then never goes to the target again; parked (`failed_at`) when it was
    /// refused for the `maximumAttempts`th time. Committed before the attempt counts as done.
    /// Returns whether it was parked.
    @discardableResult
    package func recordDeliveryAttempt(
        _ uuid: UUID, to target: String, status: Int?, error: String?, delivered: Bool, maximumAttempts: Int = .max
    ) async throws -> Bool {
        let rows = try await client.query(
            """
            UPDATE app_store.deliveries SET attempts = attempts + 1, last_status = \(status.map(Int32.init(clamping:))),
                last_error = \(error), last_attempt_at = now(), delivered_at = CASE WHEN \(delivered) THEN now() END,
                failed_at = CASE WHEN NOT \(delivered) AND attempts + 1 >= \(Int64(clamping: maximumAttempts)) THEN now() END
            WHERE target = \(target) AND notification_uuid = \(uuid) AND delivered_at IS NULL
            RETURNING failed_at IS NOT NULL
            """,
            logger: logger
        )
        for try await parked in rows.decode(Bool.self) { return parked }
        return false
    }

    /// `deliver --retry-failed`: the parked deliveries to `target` are pending again, with their
    /// attempts counted from zero. Returns how many.
    package func retryFailedDeliveries(to target: String) async throws -> Int {
        let rows = try await client.query(
            """
            WITH again AS (
                UPDATE app_store.deliveries SET failed_at = NULL, attempts = 0
                WHERE target = \(target) AND delivered_at IS NULL AND failed_at IS NOT NULL RETURNING 1)
            SELECT count(*) FROM again
            """,
            logger: logger
        )
        for try await count in rows.decode(Int.self) { return count }
        return 0
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
