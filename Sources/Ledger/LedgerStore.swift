package import Foundation
package import Logging
package import PostgresNIO
package import SignedData

/// The ledger's reads and writes. Every value reaches SQL as a bound parameter. Writes that
/// race a live webhook are settled by the database: a notification already recorded is left
/// alone, and transaction and subscription rows only move to information signed later.
package struct LedgerStore: Sendable {
    package let client: PostgresClient
    package let logger: Logger

    package init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    // MARK: Reads for the comparison (one query per batch)

    /// The stored subscription rows of these customers in this environment.
    package func subscriptions(_ originalTransactionIds: [String], pair: AppStorePair) async throws -> [String: SubscriptionRecord] {
        try await Self.subscriptions(originalTransactionIds, pair: pair, on: client, logger: logger)
    }

    static func subscriptions(
        _ originalTransactionIds: [String], pair: AppStorePair, on database: some LedgerQuerying, logger: Logger
    ) async throws -> [String: SubscriptionRecord] {
        guard !originalTransactionIds.isEmpty else { return [:] }
        let rows = try await database.ledgerQuery(
            """
            SELECT \(unescaped: SubscriptionRecord.selectList()) FROM app_store.subscriptions
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND original_transaction_id = ANY(\(originalTransactionIds))
            """,
            logger: logger
        )
        var found: [String: SubscriptionRecord] = [:]
        for try await row in rows {
            let subscription = try SubscriptionRecord.read(row)
            found[subscription.originalTransactionId] = subscription
        }
        return found
    }

    /// What the ledger holds for a page of notifications, in one statement (one round trip
    /// instead of three: under load each costs more than the query), prepared once per
    /// connection.
    package func pageState(pair: AppStorePair, notifications: [UUID], customers: [String], transactions: [String]) async throws -> PageLedgerState {
        var state = PageLedgerState(existingNotifications: [], subscriptions: [:], transactionSignedDates: [:])
        guard !notifications.isEmpty || !customers.isEmpty || !transactions.isEmpty else { return state }
        // Planned at each execution (an unnamed statement), not prepared once per connection: a
        // prepared statement's generic plan, made while the tables were small (a fresh ledger
        // under `serve`), stays a sequential scan of all three tables until an ANALYZE
        // invalidates it. Seen in `reconcile-benchmark`'s serve part: 1,650 sequential scans of
        // each table, 7.1 million rows read, in 30 s on a ledger growing from empty; planning
        // this statement costs a fraction of a millisecond. (A plan made afresh for each batch
        // scanned small tables whole too, as long as the lookup was `= ANY`: see `PageStateRead`.)
        // Each key once: the lookups are one per element.
        let read = PageStateRead(
            pair: pair, customers: Array(Set(customers)), transactions: Array(Set(transactions)), notifications: Array(Set(notifications))
        )
        let rows = try await client.query(read.query, logger: logger)
        for try await row in rows { try read.add(row, to: &state) }
        return state
    }

    /// One statement: the subscription rows of the page's customers, the signing time of its
    /// transactions the ledger holds (both of the page's environment), and which of its
    /// notifications are recorded.
    struct PageStateRead {
        enum Row {
            case subscription(SubscriptionRecord)
            case transaction(String, signed: Date)
            case notification(UUID)
        }

        /// The first column of each row says which of the three it is.
        enum Kind: Int16 {
            case subscription = 1, transaction, notification
        }

        let pair: AppStorePair
        let customers: [String]
        let transactions: [String]
        let notifications: [UUID]

        /// (kind, a transaction's signed_date, the subscription's columns); the other kinds put
        /// their key in the first subscription column. An unnamed statement (see `pageState`).
        ///
        /// Each key is looked up on its own (a LATERAL subquery with LIMIT 1, which the planner
        /// cannot flatten; every key is its table's primary key, so the limit changes nothing).
        /// As `key = ANY(array)`, the small tables of a new ledger under `serve` were read whole
        /// for every batch, since a hundred probes of an index priced at random_page_cost looked
        /// dearer: seen in `reconcile-benchmark`'s serve part, about 200 sequential scans of each
        /// of the three tables, 3 million rows read, in its first 12 s, until the tables were
        /// about 19,000 rows long.
        var query: PostgresQuery {
            let subscriptionKind = Kind.subscription.rawValue
            let transactionKind = Kind.transaction.rawValue
            let notificationKind = Kind.notification.rawValue
            return """
                SELECT \(subscriptionKind)::smallint, NULL::timestamptz, s.*
                FROM unnest(\(customers)::text[]) AS k(key) CROSS JOIN LATERAL (
                    SELECT \(unescaped: SubscriptionRecord.selectList()) FROM app_store.subscriptions
                    WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND original_transaction_id = k.key LIMIT 1) AS s
                UNION ALL
                SELECT \(transactionKind)::smallint, t.signed_date, t.transaction_id, \(unescaped: SubscriptionRecord.nullsAfterKey)
                FROM unnest(\(transactions)::text[]) AS k(key) CROSS JOIN LATERAL (
                    SELECT signed_date, transaction_id FROM app_store.transactions
                    WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND transaction_id = k.key LIMIT 1) AS t
                UNION ALL
                SELECT \(notificationKind)::smallint, NULL, n.notification_uuid::text, \(unescaped: SubscriptionRecord.nullsAfterKey)
                FROM unnest(\(notifications)::uuid[]) AS k(key) CROSS JOIN LATERAL (
                    SELECT notification_uuid FROM app_store.notifications WHERE notification_uuid = k.key LIMIT 1) AS n
                """
        }

        func add(_ row: PostgresRow, to state: inout PageLedgerState) throws {
            switch try decodeRow(row) {
            case .subscription(let subscription): state.subscriptions[subscription.originalTransactionId] = subscription
            case .transaction(let id, let signed): state.transactionSignedDates[id] = signed
            case .notification(let uuid): state.existingNotifications.insert(uuid)
            }
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            let cells = Array(row)
            let key = try cells[2].decode(String.self)
            switch Kind(rawValue: try cells[0].decode(Int16.self)) {
            case .subscription: return .subscription(try SubscriptionRecord.read(cells, from: 2))
            case .transaction: return .transaction(key, signed: try cells[1].decode(Date.self))
            case .notification:
                guard let uuid = UUID(uuidString: key) else { throw LedgerColumnMismatch(column: "notification_uuid") }
                return .notification(uuid)
            case nil: throw LedgerColumnMismatch(column: "kind")
            }
        }
    }

    /// Whether the ledger holds the notification, of any App Store (`check`'s look-up of Apple's
    /// test notification: the live path recorded it).
    package func holdsNotification(_ uuid: UUID) async throws -> Bool {
        let rows = try await client.query("SELECT count(*) FROM app_store.notifications WHERE notification_uuid = \(uuid)", logger: logger)
        for try await count in rows.decode(Int.self) { return count > 0 }
        return false
    }
}
