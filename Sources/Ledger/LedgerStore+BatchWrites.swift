package import Foundation
import Logging
import PostgresNIO
package import SignedData

/// The ledger's one write path for notifications, transactions and subscriptions (every writer:
/// `serve`, `ingest`, a run's pages, repairs), a batch per database transaction.
extension LedgerStore {
    /// Writes a batch in one database transaction: all of it or nothing, and with it the
    /// checkpoint that says the batch is done, so progress never runs ahead of what is committed.
    ///
    /// The rows, the checkpoint and the run's record of changes are one statement (a statement
    /// is a transaction of its own), so a page of notifications costs one round trip; revisions
    /// and rejections, rare in a page, add their statements inside an explicit transaction.
    package func apply(_ batch: LedgerBatch, runId: UUID?, checkpoint: (QueryCheckpoint, CheckpointScope)? = nil) async throws -> LedgerBatchOutcome {
        guard !batch.isEmpty || checkpoint != nil else { return LedgerBatchOutcome() }
        let logger = self.logger
        // Rows of transactions or subscriptions bring their lifecycle events (a statement more).
        if batch.rejected.isEmpty && batch.accounts.isEmpty && batch.refundRequestTransactions.isEmpty && batch.transactions.isEmpty && batch.subscriptions.isEmpty {
            let statement = RowsWrite(batch: batch, runId: runId, checkpoint: checkpoint)
            return try await client.withConnection { connection in
                try await Self.outcome(of: statement, on: connection, logger: logger)
            }
        }
        return try await client.withTransaction(logger: logger) { connection in
            try await Self.write(batch, runId: runId, checkpoint: checkpoint, on: connection, logger: logger)
        }
    }

    /// Reads, decides and writes a batch of notifications with their customers locked: in one
    /// database transaction, takes a transaction-scoped advisory lock for each customer
    /// (environment and originalTransactionId; each hash once, in order, so that two writers
    /// never wait for each other in a circle, even when two customers' hashes collide), reads what the ledger holds for the batch on the same
    /// connection, lets `plan` decide the batch from that, and writes it. Every writer of
    /// notifications (`serve`'s batch writers, `ingest`, a run's pages) goes through here, so a
    /// subscription row is never planned from a state another writer is changing: a field a
    /// notification lacks, copied from the row it read, cannot undo what the other one wrote.
    ///
    /// With `commitBy`, the transaction is rolled back (`CommitDeadlinePassed`) when its
    /// statements end after that instant: `serve` answers 503 for a batch it stopped waiting
    /// for, and such a batch must not commit later.
    package func applyLocked<Planned: Sendable>(
        pair: AppStorePair, notifications: [UUID], customers: [String], transactions: [String], runId: UUID?,
        checkpoint: (QueryCheckpoint, CheckpointScope)? = nil, commitBy: ContinuousClock.Instant? = nil,
        plan: (PageLedgerState) throws -> (LedgerBatch, Planned)
    ) async throws -> (LedgerBatchOutcome, Planned) {
        let logger = self.logger
        let keys = Array(Set(customers)).sorted()
        return try await client.withTransaction(logger: logger) { connection in
            if !keys.isEmpty {
                try await connection.query(
                    """
                    SELECT pg_advisory_xact_lock(hashtext('appstore-reconcile.customer'), held.hash)
                    FROM (SELECT DISTINCT hashtext(\(pair.description) || ':' || k.key) AS hash FROM unnest(\(keys)::text[]) AS k(key) ORDER BY 1) AS held
                    """,
                    logger: logger
                )
            }
            var state = PageLedgerState(existingNotifications: [], subscriptions: [:], transactionSignedDates: [:])
            if !notifications.isEmpty || !keys.isEmpty || !transactions.isEmpty {
                let read = PageStateRead(
                    pair: pair, customers: keys, transactions: Array(Set(transactions)), notifications: Array(Set(notifications)))
                for try await row in try await connection.query(read.query, logger: logger) { try read.add(row, to: &state) }
            }
            let (batch, planned) = try plan(state)
            guard !batch.isEmpty || checkpoint != nil else { return (LedgerBatchOutcome(), planned) }
            let outcome = try await Self.write(batch, runId: runId, checkpoint: checkpoint, on: connection, logger: logger)
            if let commitBy, ContinuousClock.now >= commitBy { throw CommitDeadlinePassed() }
            return (outcome, planned)
        }
    }

    /// A transaction's statements ended after its `commitBy`: rolled back, nothing written.
    package struct CommitDeadlinePassed: Error, Hashable, Sendable {}

    /// A batch's statements, inside a transaction the caller holds.
    fileprivate static func write(
        _ batch: LedgerBatch, runId: UUID?, checkpoint: (QueryCheckpoint, CheckpointScope)?, on connection: PostgresConnection, logger: Logger
    ) async throws -> LedgerBatchOutcome {
        // The rows last: the change feed's triggers fire at the end of that statement and take
        // its commit-order lock, which is then held for the commit alone (migration 0007).
        for account in batch.accounts {
            try await Self.record(account, on: connection, logger: logger)
        }
        // In one order (digest, then reason) in every transaction: two batches counting the same
        // repeats never wait for each other in a circle.
        let rejected = batch.rejected.sorted { $0.sha256 != $1.sha256 ? $0.sha256.lexicographicallyPrecedes($1.sha256) : $0.reason < $1.reason }
        for record in rejected {
            let digest = Data(record.sha256)
            try await connection.query(
                """
                INSERT INTO app_store.rejected_payloads (run_id, source, notification_uuid, reason, detail, signed_payload,
                    kept_whole, payload_sha256, payload_bytes, unverified_original_transaction_id)
                VALUES (\(runId), \(record.source), \(record.notificationUUID), \(record.reason), \(record.detail), \(record.signedPayload),
                    \(record.keptWhole), \(digest), \(record.bytes), \(record.unverifiedOriginalTransactionId))
                ON CONFLICT (payload_sha256, reason) WHERE source = 'webhook'
                DO UPDATE SET times_seen = rejected_payloads.times_seen + 1, last_rejected_at = now()
                """,
                logger: logger
            )
        }
        let writesRows = !batch.notifications.isEmpty || !batch.transactions.isEmpty || !batch.subscriptions.isEmpty || checkpoint != nil
        guard writesRows else { return LedgerBatchOutcome() }
        let outcome = try await Self.outcome(of: RowsWrite(batch: batch, runId: runId, checkpoint: checkpoint), on: connection, logger: logger)
        if !outcome.changedTransactions.isEmpty || !outcome.changedSubscriptions.isEmpty {
            let customers = Set(batch.transactions.map(\.originalTransactionId) + batch.subscriptions.map(\.originalTransactionId))
            try await Self.recordLifecycleEvents(customers: customers, on: connection, logger: logger)
        }
        // One open refund request per transaction (migration 0022), decided from the events of
        // the transactions whose requests or decisions this batch recorded.
        for (store, transactions) in batch.refundRequestTransactions {
            try await connection.query(
                "SELECT app_store.settle_consumption_requests(\(store.bundleId), \(store.environment), \(transactions))", logger: logger
            )
        }
        return outcome
    }

    /// Runs the batch's row statement and collects what it changed.
    fileprivate static func outcome(of statement: RowsWrite, on connection: PostgresConnection, logger: Logger) async throws -> LedgerBatchOutcome {
        var outcome = LedgerBatchOutcome()
        for try await (kind, key) in try await connection.execute(statement, logger: logger) {
            switch RowsWrite.Written(rawValue: kind) {
            case .notification: if let uuid = UUID(uuidString: key) { outcome.insertedNotifications.insert(uuid) }
            case .transaction: outcome.writtenTransactions.insert(key)
            case .subscription: outcome.writtenSubscriptions.insert(key)
            case .changedTransaction:
                outcome.writtenTransactions.insert(key)
                outcome.changedTransactions.insert(key)
            case .changedSubscription:
                outcome.writtenSubscriptions.insert(key)
                outcome.changedSubscriptions.insert(key)
            case nil: throw LedgerColumnMismatch(column: "kind")
            }
        }
        return outcome
    }
}
