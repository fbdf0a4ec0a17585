package import Foundation
import Ledger
package import LedgerModel
import Logging
import PostgresNIO
package import SignedData

/// What `compensate` reads and keeps (migration 0026): the notifications a run recovered in a
/// window that may have granted access, what the ledger knows of a subscription's extensions,
/// and each extension and mass extension asked of Apple.
extension LedgerStore {
    /// Notifications of `types` signed in [start, end) that a run recovered (source `history`),
    /// each with the subscription it is about as the ledger holds it now, and the earliest
    /// recording of a later notification of `grantTypes` the live server received.
    package func missedGrants(pair: AppStorePair, start: Date, end: Date, types: [String], grantTypes: [String]) async throws -> [MissedGrant] {
        let rows = try await client.query(
            """
            SELECT n.original_transaction_id, n.notification_uuid, n.notification_type, n.subtype, n.signed_date, n.recorded_at,
                (SELECT min(w.recorded_at) FROM app_store.notification_rows w
                 WHERE w.bundle_id = n.bundle_id AND w.environment = n.environment AND w.original_transaction_id = n.original_transaction_id
                    AND w.source = 'webhook' AND w.signed_date > n.signed_date AND w.notification_type = ANY(\(grantTypes)::text[])),
                s.product_id, s.status::integer, s.expires_date, s.in_app_ownership_type,
                -- The access the ledger held before it: a billing grace period's end (the
                -- subscription's state before this notification, in the change feed), else the
                -- expiry of the subscription's previous transaction (or its revocation): not
                -- of a plan the customer upgraded from (`is_upgraded`: an annual plan's expiry
                -- a year ahead granted nothing once the upgrade took effect; Apple's isUpgraded
                -- page: look for the transaction of the higher level of service instead).
                coalesce(
                    (SELECT to_timestamp((c.before ->> 'grace_period_expires_ms')::double precision / 1000)
                     FROM app_store.changes c
                     WHERE c.kind = 'subscription' AND c.notification_uuid = n.notification_uuid
                        AND c.original_transaction_id = n.original_transaction_id AND c.environment = n.environment AND c.bundle_id = n.bundle_id
                        AND (c.before ->> 'status')::integer = 4 AND c.before ? 'grace_period_expires_ms'
                     ORDER BY c.id LIMIT 1),
                    (SELECT max(least(t.expires_date, coalesce(t.revocation_date, t.expires_date))) FROM app_store.transaction_rows t
                     WHERE t.bundle_id = n.bundle_id AND t.environment = n.environment AND t.original_transaction_id = n.original_transaction_id
                        AND t.transaction_id IS DISTINCT FROM n.transaction_id AND t.is_upgraded IS NOT TRUE
                        AND t.purchase_date < coalesce(
                            (SELECT p.purchase_date FROM app_store.transaction_rows p
                             WHERE p.bundle_id = n.bundle_id AND p.environment = n.environment AND p.transaction_id = n.transaction_id),
                            n.signed_date))),
                -- For Apple's eligibility rules (ExtensionEligibility): the subscription's periods.
                \(unescaped: SubscriptionPeriod.sql)
            FROM app_store.notification_rows n
            JOIN app_store.subscriptions s
                ON s.bundle_id = n.bundle_id AND s.environment = n.environment AND s.original_transaction_id = n.original_transaction_id
            WHERE n.bundle_id = \(pair.bundleId) AND n.environment = \(pair.environment.rawValue) AND n.source = 'history'
                AND n.signed_date >= \(start) AND n.signed_date < \(end) AND n.notification_type = ANY(\(types)::text[])
            ORDER BY n.original_transaction_id, n.signed_date
            """,
            logger: logger
        )
        var found: [MissedGrant] = []
        for try await (original, uuid, type, subtype, signed, recorded, live, product, status, expires, ownership, heldUntil, periods) in rows.decode(
            (String, UUID, String, String?, Date, Date, Date?, String?, Int32?, Date?, String?, Date?, String).self
        ) {
            var grant = MissedGrant(
                originalTransactionId: original, notificationUUID: uuid, notificationType: type, subtype: subtype, signedDate: signed, recordedAt: recorded,
                grantedLiveAt: live, productId: product, status: status.map(Int.init), expiresDate: expires, ownershipType: ownership,
                accessHeldUntil: heldUntil
            )
            grant.periods = try SubscriptionPeriod.decode(json: periods)
            found.append(grant)
        }
        return found
    }

    /// What the ledger holds of one subscription's extensions: every request the tool made for
    /// it, the signing dates of its notifications of `extensionTypes` (Apple's word that it
    /// extended the renewal date), and the row of `requestIdentifier`.
    package func extensionFacts(
        pair: AppStorePair, originalTransactionId: String, requestIdentifier: UUID, extensionTypes: [String]
    ) async throws -> ExtensionFacts {
        // Every request of the subscription, the one at hand's whole row among them.
        let requests = try await client.query(
            """
            SELECT request_identifier, outcome, requested_at, notification_uuids,
                extend_by_days, reason_code, effective_date, hours_denied, apple_status, apple_error, detail
            FROM app_store.renewal_extensions
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND original_transaction_id = \(originalTransactionId)
            ORDER BY requested_at
            """,
            logger: logger
        )
        var made: [ExtensionFacts.Request] = []
        var record: RenewalExtensionRecord?
        for try await (identifier, outcome, requested, uuids, days, reason, effective, hours, status, error, detail) in requests.decode(
            (UUID, String, Date, [UUID]?, Int32, Int32, Date?, Double?, Int32?, Int64?, String?).self
        ) {
            made.append(.init(requestIdentifier: identifier, outcome: outcome, requestedAt: requested, notificationUUIDs: uuids ?? []))
            if identifier == requestIdentifier {
                record = RenewalExtensionRecord(
                    originalTransactionId: originalTransactionId, requestIdentifier: requestIdentifier, extendByDays: Int(days), reasonCode: Int(reason),
                    outcome: outcome, effectiveDate: effective, hoursDenied: hours ?? 0, appleStatus: status.map(Int.init), appleError: error, detail: detail
                )
            }
        }
        let notified = try await client.query(
            """
            SELECT signed_date FROM app_store.notification_rows
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND original_transaction_id = \(originalTransactionId)
                AND notification_type = ANY (\(extensionTypes)::text[])
            ORDER BY signed_date
            """,
            logger: logger
        )
        var extended: [Date] = []
        for try await signed in notified.decode(Date.self) { extended.append(signed) }
        return ExtensionFacts(requests: made, extendedByApple: extended, earlier: record)
    }

    /// Writes one extension's row (its key: the subscription and request identifier), over the
    /// trace written before sending.
    package func recordRenewalExtension(_ record: RenewalExtensionRecord, pair: AppStorePair, start: Date, end: Date, runId: UUID?) async throws {
        struct Fields: Encodable {
            var original_transaction_id: String
            var request_identifier: String
            var notification_uuid: String?
            var extend_by_days: Int
            var reason_code: Int
            var outcome: String
            var hours_denied: Double
            var apple_status: Int?
            var apple_error: Int64?
            var detail: String?
        }
        let fields = Fields(
            original_transaction_id: record.originalTransactionId, request_identifier: record.requestIdentifier.uuidString.lowercased(),
            notification_uuid: record.notificationUUID?.uuidString.lowercased(),
            extend_by_days: record.extendByDays, reason_code: record.reasonCode, outcome: record.outcome, hours_denied: record.hoursDenied,
            apple_status: record.appleStatus, apple_error: record.appleError, detail: record.detail
        )
        let json = String(decoding: try JSONEncoder().encode(fields), as: UTF8.self)
        try await client.query(
            """
            INSERT INTO app_store.renewal_extensions AS e (bundle_id, environment, original_transaction_id, request_identifier, notification_uuid, notification_uuids, extend_by_days,
                reason_code, outcome, hours_denied, apple_status, apple_error, detail, effective_date, window_start, window_end, run_id)
            SELECT \(pair.bundleId), \(pair.environment.rawValue), r.original_transaction_id, r.request_identifier, r.notification_uuid, \(record.notificationUUIDs)::uuid[], r.extend_by_days,
                r.reason_code, r.outcome, r.hours_denied, r.apple_status, r.apple_error, r.detail, \(record.effectiveDate), \(start), \(end), \(runId)
            FROM jsonb_to_record(\(json)::jsonb) AS r(original_transaction_id text, request_identifier uuid, notification_uuid uuid, extend_by_days integer, reason_code integer,
                outcome text, hours_denied double precision, apple_status integer, apple_error bigint, detail text)
            ON CONFLICT (bundle_id, environment, original_transaction_id, request_identifier) DO UPDATE SET
                outcome = excluded.outcome, effective_date = excluded.effective_date, apple_status = excluded.apple_status,
                apple_error = excluded.apple_error, detail = excluded.detail, hours_denied = excluded.hours_denied, run_id = excluded.run_id, updated_at = now()
            """,
            logger: logger
        )
    }

    /// The auto-renewable products the ledger holds subscriptions of.
    package func subscriptionProducts(pair: AppStorePair) async throws -> [String] {
        let rows = try await client.query(
            """
            SELECT DISTINCT product_id FROM app_store.subscriptions
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND product_id IS NOT NULL
            ORDER BY product_id
            """,
            logger: logger
        )
        var found: [String] = []
        for try await product in rows.decode(String.self) { found.append(product) }
        return found
    }

    /// The mass extension of `requestIdentifier` for a product, if asked before.
    package func massExtension(pair: AppStorePair, productId: String, requestIdentifier: UUID) async throws -> (record: MassExtensionRecord, accepted: Bool)? {
        let rows = try await client.query(
            """
            SELECT extend_by_days, reason_code, requested_at, accepted, complete, complete_date, succeeded_count, failed_count
            FROM app_store.mass_extensions
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND product_id = \(productId) AND request_identifier = \(requestIdentifier)
            """,
            logger: logger
        )
        for try await (days, reason, requested, accepted, complete, completeDate, succeeded, failed) in rows.decode(
            (Int32, Int32, Date, Bool, Bool, Date?, Int64?, Int64?).self
        ) {
            let record = MassExtensionRecord(
                productId: productId, requestIdentifier: requestIdentifier, extendByDays: Int(days), reasonCode: Int(reason), requestedAt: requested,
                complete: complete, completeDate: completeDate, succeededCount: succeeded, failedCount: failed
            )
            return (record, accepted)
        }
        return nil
    }

    /// Writes a mass extension's row: before sending (`accepted` false), once Apple took it, and
    /// as its status moves.
    package func recordMassExtension(_ record: MassExtensionRecord, accepted: Bool, pair: AppStorePair, runId: UUID?) async throws {
        try await client.query(
            """
            INSERT INTO app_store.mass_extensions AS m (bundle_id, environment, product_id, request_identifier, extend_by_days, reason_code,
                accepted, complete, complete_date, succeeded_count, failed_count, run_id, window_start, window_end)
            SELECT \(pair.bundleId), \(pair.environment.rawValue), \(record.productId), \(record.requestIdentifier), \(Int32(record.extendByDays)),
                \(Int32(record.reasonCode)), \(accepted), \(record.complete), \(record.completeDate), r.succeeded_count, r.failed_count, \(runId),
                to_timestamp(r.window_start_ms / 1000.0), to_timestamp(r.window_end_ms / 1000.0)
            FROM jsonb_to_record(\(Self.massExtensionFields(record))::jsonb)
                AS r(succeeded_count bigint, failed_count bigint, window_start_ms bigint, window_end_ms bigint)
            ON CONFLICT (bundle_id, environment, product_id, request_identifier) DO UPDATE SET
                accepted = m.accepted OR excluded.accepted, complete = excluded.complete, complete_date = excluded.complete_date,
                succeeded_count = excluded.succeeded_count, failed_count = excluded.failed_count
            """,
            logger: logger
        )
    }

    /// A mass extension's counts and window as one JSON parameter (a statement binds twelve at most).
    static func massExtensionFields(_ record: MassExtensionRecord) -> String {
        struct Fields: Encodable {
            var succeeded_count: Int64?
            var failed_count: Int64?
            var window_start_ms: Int64?
            var window_end_ms: Int64?
        }
        let fields = Fields(
            succeeded_count: record.succeededCount, failed_count: record.failedCount,
            window_start_ms: record.windowStart.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) },
            window_end_ms: record.windowEnd.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: (try? encoder.encode(fields)) ?? Data("{}".utf8), as: UTF8.self)
    }

    /// The remedies asked of Apple for `pair` (`RemedyExclusion`): each mass extension Apple took,
    /// and the per-subscription extensions (extended, or possibly: pending) by product and window.
    package func earlierRemedies(pair: AppStorePair) async throws -> [EarlierRemedy] {
        var found: [EarlierRemedy] = []
        let mass = try await client.query(
            """
            SELECT product_id, window_start, window_end, requested_at, succeeded_count, extend_by_days
            FROM app_store.mass_extensions
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND accepted
            ORDER BY requested_at
            """,
            logger: logger
        )
        for try await (product, start, end, requested, succeeded, days) in mass.decode((String, Date?, Date?, Date, Int64?, Int32).self) {
            found.append(EarlierRemedy(kind: .mass, productId: product, windowStart: start, windowEnd: end, requestedAt: requested, subscribers: succeeded, days: Int(days)))
        }
        let single = try await client.query(
            """
            SELECT s.product_id, e.window_start, e.window_end, min(e.requested_at), count(*), max(e.extend_by_days)
            FROM app_store.renewal_extensions e
            JOIN app_store.subscriptions s
                ON s.bundle_id = e.bundle_id AND s.environment = e.environment AND s.original_transaction_id = e.original_transaction_id
            WHERE e.bundle_id = \(pair.bundleId) AND e.environment = \(pair.environment.rawValue) AND e.outcome IN ('extended', 'pending')
                AND s.product_id IS NOT NULL
            GROUP BY s.product_id, e.window_start, e.window_end
            ORDER BY min(e.requested_at)
            """,
            logger: logger
        )
        for try await (product, start, end, requested, count, days) in single.decode((String, Date?, Date?, Date, Int64, Int32).self) {
            found.append(
                EarlierRemedy(kind: .perSubscription, productId: product, windowStart: start, windowEnd: end, requestedAt: requested, subscribers: count, days: Int(days)))
        }
        return found
    }

    /// Apple's RENEWAL_EXTENSION/FAILURE notifications for subscriptions of `productId` signed at or
    /// after `since` (a mass extension's request): the subscribers it could not extend, each with
    /// the subscription as the ledger holds it now and the facts of Apple's eligibility rules.
    package func massExtensionFailures(pair: AppStorePair, productId: String, since: Date) async throws -> [MissedGrant] {
        let rows = try await client.query(
            """
            SELECT n.original_transaction_id, n.notification_uuid, n.signed_date, n.recorded_at, s.status::integer, s.expires_date, s.in_app_ownership_type,
                \(unescaped: SubscriptionPeriod.sql)
            FROM app_store.notification_rows n
            JOIN app_store.subscriptions s
                ON s.bundle_id = n.bundle_id AND s.environment = n.environment AND s.original_transaction_id = n.original_transaction_id
            WHERE n.bundle_id = \(pair.bundleId) AND n.environment = \(pair.environment.rawValue) AND n.notification_type = \(NotificationType.renewalExtension.rawValue)
                AND n.subtype = \(NotificationSubtype.failure.rawValue) AND s.product_id = \(productId) AND n.signed_date >= \(since)
            ORDER BY n.original_transaction_id, n.signed_date
            """,
            logger: logger
        )
        var found: [MissedGrant] = []
        for try await (original, uuid, signed, recorded, status, expires, ownership, periods) in rows.decode(
            (String, UUID, Date, Date, Int32?, Date?, String?, String).self
        ) {
            var grant = MissedGrant(
                originalTransactionId: original, notificationUUID: uuid, notificationType: NotificationType.renewalExtension.rawValue,
                subtype: NotificationSubtype.failure.rawValue, signedDate: signed,
                recordedAt: recorded, grantedLiveAt: nil, productId: productId, status: status.map(Int.init), expiresDate: expires, ownershipType: ownership
            )
            grant.periods = try SubscriptionPeriod.decode(json: periods)
            found.append(grant)
        }
        return found
    }
}

extension SubscriptionPeriod {
    /// The periods (transactions) of the subscription of the notification row `n`, as the JSON
    /// `SubscriptionPeriod.decode(json:)` reads: a column of the queries above.
    static let sql = """
        (SELECT coalesce(jsonb_agg(jsonb_build_object(
                'offerDiscountType', t.offer_discount_type, 'price', t.price,
                'purchaseDate', extract(epoch FROM t.purchase_date), 'expiresDate', extract(epoch FROM t.expires_date))), '[]'::jsonb)::text
         FROM app_store.transaction_rows t
         WHERE t.bundle_id = n.bundle_id AND t.environment = n.environment AND t.original_transaction_id = n.original_transaction_id)
        """
}
