import Foundation
import LifecycleEvents
import Logging
import PostgresNIO

/// The outbox of lifecycle events (migration 0033, issue 66), written in the change's transaction.
extension LedgerStore {
    /// This transaction's changes' events for `customers`, into app_store.outbox while its publication exists
    /// (docs/streams.md): the feed's newest rows, above others' (it holds the feed's lock), hold before and after.
    static func recordLifecycleEvents(customers: Set<String>, on connection: PostgresConnection, logger: Logger) async throws {
        let feed = try await connection.query(
            """
            SELECT kind, bundle_id, environment, original_transaction_id, cause, before::text, after::text, changed_at
            FROM app_store.changes WHERE kind IN ('subscription', 'transaction') AND original_transaction_id = ANY(\(Array(customers)))
                AND id > coalesce((SELECT id FROM app_store.changes WHERE xmin <> pg_current_xact_id()::xid ORDER BY id DESC LIMIT 1), 0)
                AND EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'appstore_reconcile_outbox')
            ORDER BY id
            """,
            logger: logger
        )
        var changes: [OutboxKey: LifecycleChange] = [:]
        var order: [OutboxKey] = []
        for try await (kind, bundleId, environment, original, cause, before, after, changedAt) in feed.decode((String, String?, String?, String, String, String?, String, Date).self) {
            let key = OutboxKey(bundleId: bundleId ?? "", environment: environment ?? "", originalTransactionId: original)
            if changes[key] == nil {
                order.append(key)
                changes[key] = LifecycleChange(before: nil, after: nil, cause: LifecycleCause(changeFeedCause: cause), at: changedAt)
            }
            if kind == "subscription" {
                if changes[key]!.after == nil { changes[key]!.before = try before.map { try SubscriptionRecord(feedRow: $0) } }
                changes[key]!.after = try SubscriptionRecord(feedRow: after)
            } else {
                changes[key]!.transactions.append(.init(before: try before.map { try TransactionRecord(feedRow: $0) }, after: try TransactionRecord(feedRow: after)))
            }
        }
        guard !order.isEmpty else { return }
        try await addContext(to: &changes, keys: order, on: connection, logger: logger)
        let events = order.flatMap { changes[$0]!.events }
        if !events.isEmpty { try await insertOutbox(events, on: connection, logger: logger) }
    }

    struct OutboxKey: Hashable { var bundleId, environment, originalTransactionId: String }

    /// What the feed's rows do not say: the subscription's row where the change left it alone
    /// (its entitlement, its account token), and the period before each change's new ones.
    static func addContext(to changes: inout [OutboxKey: LifecycleChange], keys: [OutboxKey], on connection: PostgresConnection, logger: Logger) async throws {
        let unchanged = keys.filter { changes[$0]!.after == nil }
        if !unchanged.isEmpty {
            let rows = try await connection.query(
                """
                SELECT s.bundle_id, s.environment, \(unescaped: SubscriptionRecord.selectList(prefix: "s"))
                FROM app_store.subscriptions s
                JOIN unnest(\(unchanged.map(\.bundleId)), \(unchanged.map(\.environment)), \(unchanged.map(\.originalTransactionId))) AS k(b, e, o)
                    ON s.bundle_id = k.b AND s.environment = k.e AND s.original_transaction_id = k.o
                """,
                logger: logger
            )
            for try await row in rows {
                let cells = Array(row)
                let record = try SubscriptionRecord.read(cells, from: 2)
                let key = OutboxKey(bundleId: try cells[0].decode(String?.self) ?? "", environment: try cells[1].decode(String?.self) ?? "", originalTransactionId: record.originalTransactionId)
                changes[key]?.before = record
                changes[key]?.after = record
            }
        }
        // The period before the first new one of each subscription.
        var firsts: [(OutboxKey, Date)] = []
        for key in keys {
            let starts = changes[key]!.transactions.filter { $0.before == nil }.compactMap(\.after.purchaseDate)
            if let first = starts.min() { firsts.append((key, first)) }
        }
        guard !firsts.isEmpty else { return }
        let rows = try await connection.query(
            """
            SELECT DISTINCT ON (t.bundle_id, t.environment, t.original_transaction_id) t.bundle_id, t.environment, \(unescaped: TransactionRecord.selectList(prefix: "t"))
            FROM app_store.transaction_rows t
            JOIN unnest(\(firsts.map { $0.0.bundleId }), \(firsts.map { $0.0.environment }), \(firsts.map { $0.0.originalTransactionId }), \(firsts.map { $0.1 })) AS k(b, e, o, s)
                ON t.bundle_id = k.b AND t.environment = k.e AND t.original_transaction_id = k.o AND t.purchase_date < k.s
            WHERE t.product_type = 'Auto-Renewable Subscription'
            ORDER BY t.bundle_id, t.environment, t.original_transaction_id, t.purchase_date DESC, t.transaction_id DESC
            """,
            logger: logger
        )
        for try await row in rows {
            let cells = Array(row)
            let record = try TransactionRecord.read(cells, from: 2)
            let key = OutboxKey(bundleId: try cells[0].decode(String?.self) ?? "", environment: try cells[1].decode(String?.self) ?? "", originalTransactionId: record.originalTransactionId)
            changes[key]?.previous = record
        }
    }

    /// One statement: the events in order, each a row of its own.
    static func insertOutbox(_ events: [LifecycleEvent], on connection: PostgresConnection, logger: Logger) async throws {
        let payloads = try events.map { try $0.payloadJSON() }
        try await connection.query(
            """
            INSERT INTO app_store.outbox (id, aggregatetype, aggregateid, type, payload, bundle_id, environment)
            SELECT e.id, 'subscription', e.aggregateid, e.type, e.payload::jsonb, nullif(e.bundle_id, ''), nullif(e.environment, '')
            FROM unnest(\(events.map { _ in UUID() }), \(events.map(\.originalTransactionId)), \(events.map(\.type.rawValue)),
                \(payloads), \(events.map { $0.bundleId ?? "" }), \(events.map { $0.environment ?? "" }))
                WITH ORDINALITY AS e(id, aggregateid, type, payload, bundle_id, environment, n)
            ORDER BY e.n
            """,
            logger: logger
        )
    }
}
