import Foundation
import LedgerModel
import Logging
package import PostgresNIO
import Synchronization

/// Reading `app_store.changes` (migration 0007), the feed of every change the tool makes to
/// subscriptions and transactions, in commit order. A reader keeps the last id it handled and
/// asks for what came after it; `follow` waits for NOTIFY `app_store_changes` between reads.
package enum ChangeFeed {
    /// The NOTIFY channel: each transaction that adds rows notifies it once (empty payload).
    package static let channel = "app_store_changes"

    /// The transaction's `app_store.change_context` for a batch: why its rows change, and the
    /// notification behind each (see migration 0007).
    static func context(of batch: LedgerBatch, runId: UUID?) -> String {
        RowJSON.changeContext(
            cause: batch.cause.rawValue, runId: runId, subscriptions: batch.subscriptionNotifications, transactions: batch.transactionNotifications)
    }

    /// One change, as `appstore-reconcile changes` prints it: a JSON object on one line, with the
    /// table's columns as keys (`changed_at` in ISO 8601 UTC; before/after times in UNIX ms), and
    /// `revocation`: for a transaction whose row is revoked, what the revocation is
    /// (`RevocationKind.name`: `full_refund`, `prorated_refund`, `refund`, `family_sharing_revoked`,
    /// `upgraded`, `revoked:TYPE`), else null.
    package struct Line: Sendable, Hashable {
        package var id: Int64
        package var json: String
    }

    /// Up to `limit` changes with an id above `after`, in id order.
    static func read(after: Int64, limit: Int, on database: some LedgerQuerying, logger: Logger) async throws -> [Line] {
        let rows = try await database.ledgerQuery(
            // The rows first: pg_stat_activity keeps a query's first 1,024 bytes, and an operator
            // (or a test) finding the follower's backend looks for what it reads.
            """
            WITH c AS (SELECT * FROM app_store.changes WHERE id > \(after) ORDER BY id LIMIT \(limit))
            SELECT id, json_build_object(
                'id', id,
                'changed_at', to_char(changed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                'bundle_id', bundle_id, 'environment', environment, 'original_transaction_id', original_transaction_id,
                'app_account_token', app_account_token, 'kind', kind, 'before', before, 'after', after,
                'cause', cause, 'notification_uuid', notification_uuid, 'run_id', run_id,
                'revocation', CASE WHEN kind = 'transaction' THEN \(unescaped: RevocationKind.sql(row: "after")) END
            )::text
            FROM c ORDER BY id
            """,
            logger: logger
        )
        var lines: [Line] = []
        for try await (id, json) in rows.decode((Int64, String).self) { lines.append(Line(id: id, json: json)) }
        return lines
    }

    /// The changes after `after`, handed to `emit` in chunks as they are read, until `limit` (nil:
    /// no limit) have been; then, with `follow`, each change committed later, as it commits, until
    /// the task is cancelled. LISTEN starts before the first read, so a commit between the read
    /// and the wait is not missed. Returns the last id handed over.
    @discardableResult
    package static func stream(
        client: PostgresClient, after: Int64, limit: Int?, follow: Bool, logger: Logger, emit: @Sendable ([Line]) -> Void
    ) async throws -> Int64 {
        try await client.withConnection { connection in
            guard follow else {
                return try await drain(Position(cursor: after, remaining: limit ?? Int.max), on: connection, logger: logger, emit: emit).cursor
            }
            return try await connection.listen(on: channel) { notifications in
                var position = try await drain(Position(cursor: after, remaining: limit ?? Int.max), on: connection, logger: logger, emit: emit)
                guard position.remaining > 0 else { return position.cursor }
                for try await _ in notifications {
                    position = try await drain(position, on: connection, logger: logger, emit: emit)
                    if position.remaining == 0 { break }
                }
                return position.cursor
            }
        }
    }

    /// Follows the feed as `stream(follow: true)` does, and survives the database connection
    /// ending under it (a restart, a failover, `pg_terminate_backend`, a network cut): it connects
    /// again after `firstDelay`, doubling up to `maximumDelay` while attempts fail, and goes on
    /// after the last id it handed over, so every change is handed over exactly once. Ends when
    /// `limit` changes were handed over or the task is cancelled. Returns the last id handed over.
    @discardableResult
    package static func follow(
        client: PostgresClient, after: Int64, limit: Int?, logger: Logger, firstDelay: Duration = .milliseconds(500), maximumDelay: Duration = .seconds(30),
        emit: @escaping @Sendable ([Line]) -> Void
    ) async throws -> Int64 {
        // Moved on right after each emit, with no suspension between: what a failure leaves here
        // is exactly what was handed over.
        let position = Tracked(Position(cursor: after, remaining: limit ?? Int.max))
        var delay = firstDelay
        let connected = Tracked(false)
        while true {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: channel) { notifications in
                        try await drain(tracking: position, on: connection, logger: logger, emit: emit)
                        connected.withLock { $0 = true }
                        guard position.withLock({ $0.remaining }) > 0 else { return }
                        for try await _ in notifications {
                            try await drain(tracking: position, on: connection, logger: logger, emit: emit)
                            if position.withLock({ $0.remaining }) == 0 { return }
                        }
                        // The notifications ended without an error: the connection did.
                        throw ConnectionEnded()
                    }
                }
                return position.withLock { $0.cursor }
            } catch {
                try Task.checkCancellation()
                // A connection that worked starts the pauses over.
                if connected.withLock({ $0 }) { delay = firstDelay }
                connected.withLock { $0 = false }
                let cursor = position.withLock { $0.cursor }
                logger.warning(
                    "changes: the connection to the database ended; connecting again in \(delay), after change \(cursor)",
                    metadata: ["error": "\(String(describing: type(of: error)))"])
                try await Task.sleep(for: delay)
                delay = min(delay * 2, maximumDelay)
            }
        }
    }

    struct ConnectionEnded: Error {}

    /// A value shared with the connection's closures.
    final class Tracked<Value: Sendable>: Sendable {
        private let value: Mutex<Value>
        init(_ value: Value) { self.value = Mutex(value) }
        func withLock<Result>(_ body: (inout Value) -> Result) -> Result { value.withLock { body(&$0) } }
    }

    /// `drain`, moving `position` on with each chunk handed over.
    private static func drain(
        tracking position: Tracked<Position>, on connection: PostgresConnection, logger: Logger, emit: @Sendable ([Line]) -> Void
    ) async throws {
        while true {
            let (cursor, remaining) = position.withLock { ($0.cursor, $0.remaining) }
            guard remaining > 0 else { return }
            let lines = try await read(after: cursor, limit: min(remaining, 1_000), on: connection, logger: logger)
            guard let last = lines.last else { return }
            emit(lines)
            position.withLock {
                $0.cursor = last.id
                $0.remaining -= lines.count
            }
        }
    }

    /// Where a reader is: the last id handed over, and how many more it may hand over.
    struct Position: Sendable {
        var cursor: Int64
        var remaining: Int
    }

    /// Hands over everything after the position, up to its limit.
    private static func drain(
        _ start: Position, on connection: PostgresConnection, logger: Logger, emit: @Sendable ([Line]) -> Void
    ) async throws -> Position {
        var position = start
        while position.remaining > 0 {
            let lines = try await read(after: position.cursor, limit: min(position.remaining, 1_000), on: connection, logger: logger)
            guard let last = lines.last else { break }
            emit(lines)
            position.cursor = last.id
            position.remaining -= lines.count
        }
        return position
    }
}
