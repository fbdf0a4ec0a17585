import Foundation
import Logging
import PostgresNIO
import SignedData

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

    // MARK: Writes

    /// Whether the ledger holds the notification, of any App Store (`check`'s look-up of Apple's
    /// test notification: the live path recorded it).
    package func holdsNotification(_ uuid: UUID) async throws -> Bool {
        let rows = try await client.query("SELECT count(*) FROM app_store.notifications WHERE notification_uuid = \(uuid)", logger: logger)
        for try await count in rows.decode(Int.self) { return count > 0 }
        return false
    }

    /// Writes a batch in one database transaction: all of it or nothing, and with it the
    /// checkpoint that says the batch is done, so progress never runs ahead of what is committed.
    ///
    /// The rows, the checkpoint and the run's record of changes are one statement (a statement
    /// is a transaction of its own), so a page of notifications costs one round trip; revisions
    /// and rejections, rare in a page, add their statements inside an explicit transaction.
    package func apply(_ batch: LedgerBatch, runId: UUID?, checkpoint: (QueryCheckpoint, CheckpointScope)? = nil) async throws -> LedgerBatchOutcome {
        guard !batch.isEmpty || checkpoint != nil else { return LedgerBatchOutcome() }
        let logger = self.logger
        if batch.rejected.isEmpty && batch.accounts.isEmpty && batch.refundRequestTransactions.isEmpty {
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
    private static func write(
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
    private static func outcome(of statement: RowsWrite, on connection: PostgresConnection, logger: Logger) async throws -> LedgerBatchOutcome {
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

    /// The statement that writes a batch's notifications (new ones only), transactions and
    /// subscriptions (newer signed versions only), the checkpoint, for a run the before → after
    /// of the subscriptions it did change, and the re-deliveries of the new notifications (when
    /// the batch has a target); it returns what each write changed, as (kind, key) rows
    /// (`Written`). The column lists come from the records' tables (`NotificationRecord.columns` …).
    /// It also sets the transaction's `app_store.change_context` (why the rows change, for the
    /// change feed's row triggers of migration 0007, which fire at the end of the statement).
    ///
    /// Data-modifying CTEs see the same snapshot and reach each other only through RETURNING,
    /// which is how the record of changes keeps to the subscriptions the upsert changed.
    ///
    /// Prepared once per connection: parsing and planning it for every page was on the critical
    /// path of pass 1.
    struct RowsWrite: PostgresPreparedStatement {
        typealias Row = (Int16, String)

        /// What a returned row reports: its key is a notification inserted, a transaction or a
        /// subscription written with its signing time alone moved, or written with its content changed.
        enum Written: Int16 {
            case notification = 1, transaction, subscription, changedTransaction, changedSubscription
        }

        static let sql = """
            WITH checkpoint AS (
                INSERT INTO app_store.run_checkpoints (bundle_id, environment, window_start, window_end, only_failures, shard, query, position,
                    pagination_token, completed, run_id)
                SELECT $23::text, $1::text, $2::timestamptz, $3::timestamptz,
                    $4::boolean, $5::text, $6::text, $7::integer,
                    $8::text, $9::boolean, $10::uuid
                WHERE $11::boolean
                ON CONFLICT (bundle_id, environment, window_start, window_end, only_failures, shard, query) DO UPDATE SET
                    position = EXCLUDED.position, pagination_token = EXCLUDED.pagination_token, completed = EXCLUDED.completed,
                    run_id = EXCLUDED.run_id, updated_at = now()
                RETURNING 1
            ), inserted_notifications AS (
                INSERT INTO app_store.notification_rows (\(NotificationRecord.selectList()), signed_payload_key)
                SELECT \(NotificationRecord.values(from: "r")), p.object_key
                FROM jsonb_to_recordset($12::text::jsonb) AS r(\(NotificationRecord.recordsetTypes))
                JOIN unnest($13::uuid[], $14::bytea[]) AS p(notification_uuid, object_key) USING (notification_uuid)
                ON CONFLICT (notification_uuid) DO NOTHING
                RETURNING notification_uuid, notification_type, bundle_id, environment, transaction_id, signed_date
            ), recorded_consumption_requests AS (
                INSERT INTO app_store.consumption_requests (\(ConsumptionRequestRecord.selectList()))
                SELECT \(ConsumptionRequestRecord.values(from: "r"))
                FROM jsonb_to_recordset($22::text::jsonb) AS r(\(ConsumptionRequestRecord.recordsetTypes))
                JOIN inserted_notifications USING (notification_uuid)
                -- A request naming its transaction gets its row when its episode is settled
                -- (after this statement): only an episode's first request has one.
                WHERE r.transaction_id IS NULL
                ON CONFLICT (notification_uuid) DO NOTHING
                RETURNING 1
            ), recorded_request_events AS (
                INSERT INTO app_store.refund_request_events (kind, signed_date, \(ConsumptionRequestRecord.selectList()))
                SELECT 'request', i.signed_date, \(ConsumptionRequestRecord.values(from: "r"))
                FROM jsonb_to_recordset($22::text::jsonb) AS r(\(ConsumptionRequestRecord.recordsetTypes))
                JOIN inserted_notifications i USING (notification_uuid)
                WHERE r.transaction_id IS NOT NULL
                ON CONFLICT (notification_uuid) DO NOTHING
                RETURNING 1
            ), recorded_decision_events AS (
                INSERT INTO app_store.refund_request_events (notification_uuid, kind, bundle_id, environment, transaction_id, signed_date)
                SELECT i.notification_uuid, 'decision', i.bundle_id, i.environment, i.transaction_id, i.signed_date
                FROM inserted_notifications i
                WHERE i.notification_uuid = ANY($35::uuid[])
                    AND i.transaction_id IS NOT NULL
                ON CONFLICT (notification_uuid) DO NOTHING
                RETURNING 1
            ), written_transactions AS (
                INSERT INTO app_store.transaction_rows (\(TransactionRecord.selectList()), signed_transaction_key)
                SELECT \(TransactionRecord.values(from: "r")), p.object_key
                FROM jsonb_to_recordset($15::text::jsonb) AS r(\(TransactionRecord.recordsetTypes))
                JOIN unnest($16::text[], $17::bytea[]) AS p(transaction_id, object_key) USING (transaction_id)
                ON CONFLICT (bundle_id, environment, transaction_id) DO UPDATE SET
                    \(TransactionRecord.updateList(table: "app_store.transaction_rows")),
                    signed_transaction_key = CASE WHEN \(transactionChanges) THEN EXCLUDED.signed_transaction_key
                        ELSE app_store.transaction_rows.signed_transaction_key END,
                    signed_transaction = CASE WHEN \(transactionChanges) THEN NULL
                        ELSE app_store.transaction_rows.signed_transaction END,
                    updated_at = CASE WHEN \(transactionChanges) THEN now() ELSE app_store.transaction_rows.updated_at END
                WHERE app_store.transaction_rows.signed_date < EXCLUDED.signed_date
                    OR ($34::boolean AND app_store.transaction_rows.signed_date = EXCLUDED.signed_date AND \(transactionChanges))
                RETURNING transaction_id, updated_at = now() AS content_changed
            ), stored_headers AS (
                INSERT INTO app_store.jws_headers (header_sha256, header)
                SELECT * FROM unnest($24::bytea[], $25::text[])
                ON CONFLICT DO NOTHING
                RETURNING 1
            ), stored_objects AS (
                INSERT INTO app_store.signed_objects (jws_sha256, header_sha256, payload, signature, nested, whole)
                SELECT o.object_key, CASE WHEN NOT o.whole THEN o.header_key END, CASE WHEN NOT o.whole THEN o.payload END,
                    CASE WHEN NOT o.whole THEN o.signature END, CASE WHEN NOT o.whole THEN nullif(o.nested, ''::bytea) END,
                    CASE WHEN o.whole THEN o.text END
                FROM unnest($26::bytea[], $27::bytea[], $28::bytea[], $29::bytea[], $30::bytea[], $31::bool[], $32::text[], $33::text[])
                    AS o(object_key, header_key, payload, signature, nested, whole, text, owner)
                WHERE o.owner IN (SELECT 'n:' || notification_uuid::text FROM inserted_notifications)
                    OR o.owner IN (SELECT 't:' || transaction_id FROM written_transactions WHERE content_changed)
                ON CONFLICT DO NOTHING
                RETURNING 1
            ), written_subscriptions AS (
                INSERT INTO app_store.subscriptions (\(SubscriptionRecord.selectList()))
                SELECT \(SubscriptionRecord.values(from: "r"))
                FROM jsonb_to_recordset($18::text::jsonb) AS r(\(SubscriptionRecord.recordsetTypes))
                ON CONFLICT (bundle_id, environment, original_transaction_id) DO UPDATE SET
                    \(SubscriptionRecord.updateList(table: "app_store.subscriptions")),
                    updated_at = CASE WHEN \(subscriptionChanges) THEN now() ELSE app_store.subscriptions.updated_at END
                WHERE app_store.subscriptions.last_signed_date < EXCLUDED.last_signed_date
                    OR (app_store.subscriptions.last_signed_date = EXCLUDED.last_signed_date
                        AND coalesce(app_store.subscriptions.renewal_signed_date, app_store.subscriptions.last_signed_date)
                            < EXCLUDED.renewal_signed_date)
                    OR ($34::boolean AND app_store.subscriptions.last_signed_date = EXCLUDED.last_signed_date AND \(subscriptionChanges))
                RETURNING original_transaction_id, updated_at = now() AS content_changed
            ), changed_subscriptions AS (
                SELECT original_transaction_id FROM written_subscriptions WHERE content_changed
            ), recorded_changes AS (
                INSERT INTO app_store.run_subscription_changes (run_id, original_transaction_id, before, after)
                SELECT $10::uuid, r.original_transaction_id, r.before, r.after
                FROM jsonb_to_recordset($19::text::jsonb) AS r(original_transaction_id text, before jsonb, after jsonb)
                JOIN changed_subscriptions USING (original_transaction_id)
                ON CONFLICT (run_id, original_transaction_id) DO UPDATE SET after = EXCLUDED.after
                RETURNING 1
            ), queued_deliveries AS (
                INSERT INTO app_store.deliveries (notification_uuid, target, run_id)
                SELECT notification_uuid, $21::text, $10::uuid FROM inserted_notifications WHERE $21::text IS NOT NULL
                ON CONFLICT DO NOTHING
                RETURNING 1
            ), context AS (
                SELECT set_config('app_store.change_context', $20::text, true) AS value
            )
            SELECT \(Written.notification.rawValue)::smallint, notification_uuid::text FROM inserted_notifications
            UNION ALL SELECT CASE WHEN content_changed THEN \(Written.changedTransaction.rawValue)::smallint
                ELSE \(Written.transaction.rawValue)::smallint END, transaction_id FROM written_transactions
            UNION ALL SELECT CASE WHEN content_changed THEN \(Written.changedSubscription.rawValue)::smallint
                ELSE \(Written.subscription.rawValue)::smallint END, original_transaction_id FROM written_subscriptions
            UNION ALL SELECT \(Written.notification.rawValue)::smallint, value FROM context WHERE value IS NULL
            """

        /// Whether an upsert changes what the row says (`LedgerRow.contentChanges`). A version
        /// that only says the same again, signed later, moves the signing time (the ordering
        /// guard: a version signed between the two must not win) and nothing else: the stored
        /// JWS stays the one that first said it, `updated_at` stays the time the content last
        /// changed, and the run's record of changes leaves it out, as the change feed's triggers
        /// do (migration 0015). The statement reports the row as written but not changed: the
        /// notification was applied (it is the newest the ledger has), not stale, and a repair
        /// that only re-signed a row changed nothing.
        static let transactionChanges = TransactionRecord.contentChanges(table: "app_store.transaction_rows")
        static let subscriptionChanges = SubscriptionRecord.contentChanges(table: "app_store.subscriptions")

        static let bindingDataTypes: [PostgresDataType] = [
            .text, .timestamptz, .timestamptz, .bool, .text, .text, .int4, .text, .bool, .uuid, .bool,
            .text, .uuidArray, .byteaArray, .text, .textArray, .byteaArray, .text, .text,
            .text, .text, .text, .text,
            .byteaArray, .textArray, .byteaArray, .byteaArray, .byteaArray, .byteaArray, .byteaArray, .boolArray, .textArray, .textArray,
            .bool,
        ]

        let batch: LedgerBatch
        let runId: UUID?
        let checkpoint: (QueryCheckpoint, CheckpointScope)?

        func makeBindings() throws -> PostgresBindings {
            let notifications = batch.notifications
            let transactions = LedgerBatchRows.transactions(batch.transactions)
            let objects = LedgerBatchRows.Objects(notifications: notifications, transactions: transactions)
            let subscriptions = LedgerBatchRows.subscriptions(batch.subscriptions)
            // Every subscription's candidate record; the statement keeps those the upsert changed.
            let changes = runId == nil ? [] : subscriptions.map { after in
                LedgerBatchRows.SubscriptionChange(before: batch.subscriptionsBefore[after.originalTransactionId] ?? nil, after: after)
            }
            let scope = checkpoint?.1
            let point = checkpoint?.0
            var bindings = PostgresBindings(capacity: 35)
            bindings.append(scope?.pair.environment.rawValue)
            bindings.append(scope?.windowStart)
            bindings.append(scope?.windowEnd)
            bindings.append(scope?.onlyFailures)
            bindings.append(scope?.shard)
            bindings.append(point?.query)
            bindings.append(point.map { Int32(clamping: $0.position) })
            bindings.append(point?.paginationToken)
            bindings.append(point?.completed)
            bindings.append(runId)
            bindings.append(checkpoint != nil)
            bindings.append(RowJSON.array(notifications))
            bindings.append(notifications.map(\.notificationUUID))
            bindings.append(objects.notificationKeys)
            bindings.append(RowJSON.array(transactions))
            bindings.append(transactions.map(\.transactionId))
            bindings.append(objects.transactionKeys)
            bindings.append(RowJSON.array(subscriptions))
            bindings.append(RowJSON.array(changes))
            bindings.append(ChangeFeed.context(of: batch, runId: runId))
            bindings.append(batch.deliverTo)
            bindings.append(RowJSON.array(batch.consumptionRequests))
            bindings.append(scope?.pair.bundleId)
            bindings.append(objects.headerKeys)
            bindings.append(objects.headers)
            bindings.append(objects.keys)
            bindings.append(objects.headerOfObject)
            bindings.append(objects.payloads)
            bindings.append(objects.signatures)
            bindings.append(objects.nested)
            bindings.append(objects.whole)
            bindings.append(objects.wholeTexts)
            bindings.append(objects.owners)
            // Apple's answer to a repair, signed at the same time as the row but saying something
            // else, is the truth: content decides, not only the signing time (issue 48, point 9).
            bindings.append(batch.cause == .repair)
            // Apple's decisions on refund requests among the notifications (their type's policy).
            bindings.append(batch.notifications.filter { $0.refundEpisode == .decision }.map(\.notificationUUID))
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            try row.decode(Row.self)
        }
    }

    /// Up to `limit` of the subscriptions a run changed, after `cursor`, in order of
    /// originalTransactionId: before the run first changed each (nil: none) and as it left it.
    package func subscriptionChanges(ofRun runId: UUID, after cursor: String?, limit: Int) async throws
        -> [(customer: String, before: SubscriptionRecord?, after: SubscriptionRecord)]
    {
        let rows = try await client.query(
            """
            SELECT c.original_transaction_id, b.original_transaction_id IS NOT NULL,
                \(unescaped: SubscriptionRecord.values(from: "b")), \(unescaped: SubscriptionRecord.values(from: "a"))
            FROM app_store.run_subscription_changes c
            LEFT JOIN LATERAL jsonb_to_record(c.before) AS b(\(unescaped: SubscriptionRecord.recordsetTypes)) ON true
            CROSS JOIN LATERAL jsonb_to_record(c.after) AS a(\(unescaped: SubscriptionRecord.recordsetTypes))
            WHERE c.run_id = \(runId) AND c.original_transaction_id > \(cursor ?? "") ORDER BY c.original_transaction_id LIMIT \(limit)
            """,
            logger: logger
        )
        let width = SubscriptionRecord.columns.count
        var found: [(customer: String, before: SubscriptionRecord?, after: SubscriptionRecord)] = []
        for try await row in rows {
            let cells = Array(row)
            let before = try cells[1].decode(Bool.self) ? try SubscriptionRecord.read(cells, from: 2) : nil
            found.append((try cells[0].decode(String.self), before, try SubscriptionRecord.read(cells, from: 2 + width)))
        }
        return found
    }

    // MARK: Reads and writes for repairs (pass 2, per Apple account)

    /// The customer (originalTransactionId) a transaction ID of this environment belongs to,
    /// when the ledger knows it.
    package func customer(ofTransaction id: String, pair: AppStorePair) async throws -> String? {
        let rows = try await client.query(
            """
            SELECT original_transaction_id FROM app_store.transactions WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND transaction_id = \(id)
            UNION ALL SELECT original_transaction_id FROM app_store.subscriptions
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND original_transaction_id = \(id)
            LIMIT 1
            """,
            logger: logger
        )
        for try await customer in rows.decode(String.self) { return customer }
        return nil
    }

    /// Whether verified data in the ledger names this originalTransactionId in this environment
    /// (a transaction or subscription row, or a verified notification): only such IDs are sent to Apple.
    package func knows(originalTransactionIds: [String], pair: AppStorePair) async throws -> Set<String> {
        guard !originalTransactionIds.isEmpty else { return [] }
        let rows = try await client.query(
            """
            SELECT original_transaction_id FROM app_store.transactions
            WHERE original_transaction_id = ANY(\(originalTransactionIds)) AND bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue)
            UNION SELECT original_transaction_id FROM app_store.subscriptions
            WHERE original_transaction_id = ANY(\(originalTransactionIds)) AND bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue)
            UNION SELECT original_transaction_id FROM app_store.notifications
            WHERE original_transaction_id = ANY(\(originalTransactionIds)) AND bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue)
            """,
            logger: logger
        )
        var found: Set<String> = []
        for try await id in rows.decode(String.self) { found.insert(id) }
        return found
    }

    /// A customer's stored transactions in this environment.
    package func transactions(ofCustomer customer: String, pair: AppStorePair) async throws -> [TransactionRecord] {
        try await Self.transactions(ofCustomers: [customer], pair: pair, on: client, logger: logger)
    }

    /// The account an originalTransactionId belongs to (nil before pass 2 first asked about it),
    /// with its members, and the rows of those members and of `others`: what pass 2 compares with
    /// Apple's answer, read on one leased connection.
    package func accountState(pair: AppStorePair, of customer: String, and others: [String] = []) async throws -> StoredAccountState {
        let logger = self.logger
        return try await client.withConnection { connection in
            var state = StoredAccountState(accountId: nil, revision: nil, members: [], subscriptions: [:], transactions: [])
            let accountRows = try await connection.query(
                """
                SELECT a.account_id, a.revision FROM app_store.account_members m
                JOIN app_store.accounts a ON a.bundle_id = m.bundle_id AND a.environment = m.environment AND a.account_id = m.account_id
                WHERE m.bundle_id = \(pair.bundleId) AND m.environment = \(pair.environment.rawValue) AND m.original_transaction_id = \(customer)
                """,
                logger: logger
            )
            for try await (account, revision) in accountRows.decode((String, String?).self) {
                state.accountId = account
                state.revision = revision
            }
            if let account = state.accountId {
                let memberRows = try await connection.query(
                    """
                    SELECT original_transaction_id FROM app_store.account_members
                    WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND account_id = \(account) ORDER BY 1
                    """,
                    logger: logger
                )
                for try await member in memberRows.decode(String.self) { state.members.append(member) }
            }
            let ids = Array(Set(state.members + others + [customer])).sorted()
            state.subscriptions = try await Self.subscriptions(ids, pair: pair, on: connection, logger: logger)
            state.transactions = try await Self.transactions(ofCustomers: ids, pair: pair, on: connection, logger: logger)
            return state
        }
    }

    /// The rows of these originalTransactionIds (pass 2 reads them again once Apple's answer has
    /// named members the ledger did not know were in the account).
    package func rows(of customers: [String], pair: AppStorePair) async throws -> (subscriptions: [String: SubscriptionRecord], transactions: [TransactionRecord]) {
        let logger = self.logger
        return try await client.withConnection { connection in
            (
                try await Self.subscriptions(customers, pair: pair, on: connection, logger: logger),
                try await Self.transactions(ofCustomers: customers, pair: pair, on: connection, logger: logger)
            )
        }
    }

    static func transactions(
        ofCustomers customers: [String], pair: AppStorePair, on database: some LedgerQuerying, logger: Logger
    ) async throws -> [TransactionRecord] {
        guard !customers.isEmpty else { return [] }
        let rows = try await database.ledgerQuery(
            """
            SELECT \(unescaped: TransactionRecord.selectList()), signed_transaction
            FROM app_store.transactions WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND original_transaction_id = ANY(\(customers))
            ORDER BY purchase_date, transaction_id
            """,
            logger: logger
        )
        var found: [TransactionRecord] = []
        let width = TransactionRecord.columns.count
        for try await row in rows {
            let cells = Array(row)
            var transaction = try TransactionRecord.read(cells)
            transaction.signedTransaction = try cells[width].decode(String.self)
            found.append(transaction)
        }
        return found
    }

    /// Records an account as pass 2 left it, in the transaction of what it wrote: verified now,
    /// its revision (kept, replaced or forgotten), and every member Apple's answers showed.
    ///
    /// The account's key is the numerically smallest originalTransactionId it is known to hold,
    /// whichever of them pass 2 asked with. Two originalTransactionIds of one account the ledger
    /// could not yet tell apart may be repaired at once, each as an account of its own; when their
    /// answers meet here, the accounts merge under that key, whatever the order of the commits,
    /// and keep a revision. Recordings of one environment take turns (a transaction-level advisory
    /// lock, held to the commit). It is taken before the batch's rows are written: a transaction
    /// holding it may then wait on a row lock, but whoever holds that row lock never waits on this
    /// lock (a transaction that records an account takes it before any row lock; the others never
    /// take it), so the waits cannot form a cycle.
    static func record(_ account: AccountVerification, on connection: PostgresConnection, logger: Logger) async throws {
        let pair = account.pair
        try await connection.query(
            "SELECT pg_advisory_xact_lock(hashtext('appstore-reconcile.accounts'), hashtext(\(pair.description)))", logger: logger
        )
        let members = Array(Set(account.members + [account.accountId])).sorted()
        var existing: Set<String> = []
        let rows = try await connection.query(
            """
            SELECT DISTINCT account_id FROM app_store.account_members
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND original_transaction_id = ANY(\(members))
            """,
            logger: logger
        )
        for try await key in rows.decode(String.self) { existing.insert(key) }
        let key = existing.union(members).min { ($0.count, $0) < ($1.count, $1) }!
        var carried: String?
        for old in existing.sorted() where old != key {
            try await connection.query(
                "UPDATE app_store.account_members SET account_id = \(key) WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND account_id = \(old)", logger: logger
            )
            let dropped = try await connection.query(
                "DELETE FROM app_store.accounts WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND account_id = \(old) RETURNING revision", logger: logger
            )
            for try await revision in dropped.decode(String?.self) { carried = carried ?? revision }
        }
        let (keep, revision): (Bool, String?) =
            switch account.revision {
            case .unchanged: (true, carried)
            case .store(let revision): (false, revision)
            case .forget: (false, nil)
            }
        try await connection.query(
            """
            INSERT INTO app_store.accounts (bundle_id, environment, account_id, revision, verified_at, transactions_verified_at, apple_answer)
            VALUES (
                \(pair.bundleId), \(pair.environment.rawValue), \(key), \(revision), CASE WHEN \(account.verified) THEN now() END,
                CASE WHEN \(account.verified) AND \(account.transactionsChecked) THEN now() END, \(account.appleAnswer))
            ON CONFLICT (bundle_id, environment, account_id) DO UPDATE SET
                apple_answer = CASE WHEN \(account.verified) THEN EXCLUDED.apple_answer ELSE app_store.accounts.apple_answer END,
                verified_at = CASE WHEN \(account.verified) THEN now() ELSE app_store.accounts.verified_at END,
                transactions_verified_at = CASE WHEN \(account.verified) AND \(account.transactionsChecked) THEN now()
                    ELSE app_store.accounts.transactions_verified_at END,
                revision = CASE WHEN \(keep) THEN coalesce(app_store.accounts.revision, EXCLUDED.revision) ELSE EXCLUDED.revision END
            """,
            logger: logger
        )
        try await connection.query(
            """
            INSERT INTO app_store.account_members (bundle_id, environment, original_transaction_id, account_id)
            SELECT \(pair.bundleId), \(pair.environment.rawValue), member, \(key) FROM unnest(\(members)::text[]) AS member
            ON CONFLICT (bundle_id, environment, original_transaction_id) DO UPDATE SET account_id = EXCLUDED.account_id
            """,
            logger: logger
        )
    }

    // "Recovered" below: a notification from history (`source = 'history'`), or of the refund flow
    // however it was recorded (`RecoveredTypes.refundFlow`), of this environment, signed in the window or recorded since the run `runId` started, and recorded after its
    // account was last verified: what a run (or an earlier run of the window that died before its
    // pass 2, or whose pass 2 could not check the account) recovered and pass 2 has not checked:
    // recorded after its account's last check of the kind it needs (the transaction history for
    // `RecoveredTypes.needingTransactionHistory`, the statuses for the rest; `a` is its account, NULL: never checked).

    /// Which of these customers have a notification recovered by the runs, and whether any of
    /// those needs the transaction history (`types.needingTransactionHistory`).
    package func recoveredCustomers(
        among customers: [String], pair: AppStorePair, from start: Date, to end: Date, sinceRun runId: UUID?, types: RecoveredTypes
    ) async throws -> [String: Bool] {
        guard !customers.isEmpty else { return [:] }
        let rows = try await client.query(
            """
            SELECT n.original_transaction_id, bool_or(n.notification_type = ANY(\(types.needingTransactionHistory)))
            FROM app_store.notifications n
            LEFT JOIN app_store.account_members m ON m.bundle_id = n.bundle_id AND m.environment = n.environment AND m.original_transaction_id = n.original_transaction_id
            LEFT JOIN app_store.accounts a ON a.bundle_id = m.bundle_id AND a.environment = m.environment AND a.account_id = m.account_id
            WHERE n.original_transaction_id = ANY(\(customers)) AND n.bundle_id = \(pair.bundleId) AND n.environment = \(pair.environment.rawValue)
                AND (n.source = 'history' OR n.notification_type = ANY(\(types.refundFlow)))
                AND ((n.signed_date >= \(start) AND n.signed_date < \(end))
                    OR n.recorded_at >= (SELECT started_at FROM app_store.runs WHERE run_id = \(runId)))
                AND (CASE WHEN n.notification_type = ANY(\(types.needingTransactionHistory))
                    THEN a.transactions_verified_at IS NULL OR n.recorded_at > a.transactions_verified_at
                    ELSE a.verified_at IS NULL OR n.recorded_at > a.verified_at END)
            GROUP BY 1
            """,
            logger: logger
        )
        var found: [String: Bool] = [:]
        for try await (customer, needsHistory) in rows.decode((String, Bool).self) { found[customer] = needsHistory }
        return found
    }

    /// Customers without a subscription row (one-time purchases) with a notification recovered by
    /// the runs: up to `limit` after `cursor`, in order, and whether they need the transaction history.
    package func customersRecoveredWithoutSubscription(
        pair: AppStorePair, from start: Date, to end: Date, sinceRun runId: UUID?, after cursor: String?, limit: Int, types: RecoveredTypes
    ) async throws -> [(customer: String, needsTransactionHistory: Bool)] {
        let rows = try await client.query(
            """
            SELECT n.original_transaction_id, bool_or(n.notification_type = ANY(\(types.needingTransactionHistory)))
            FROM app_store.notifications n
            LEFT JOIN app_store.account_members m ON m.bundle_id = n.bundle_id AND m.environment = n.environment AND m.original_transaction_id = n.original_transaction_id
            LEFT JOIN app_store.accounts a ON a.bundle_id = m.bundle_id AND a.environment = m.environment AND a.account_id = m.account_id
            WHERE n.original_transaction_id > \(cursor ?? "") AND n.bundle_id = \(pair.bundleId) AND n.environment = \(pair.environment.rawValue)
                AND (n.source = 'history' OR n.notification_type = ANY(\(types.refundFlow)))
                AND ((n.signed_date >= \(start) AND n.signed_date < \(end))
                    OR n.recorded_at >= (SELECT started_at FROM app_store.runs WHERE run_id = \(runId)))
                AND (CASE WHEN n.notification_type = ANY(\(types.needingTransactionHistory))
                    THEN a.transactions_verified_at IS NULL OR n.recorded_at > a.transactions_verified_at
                    ELSE a.verified_at IS NULL OR n.recorded_at > a.verified_at END)
                AND NOT EXISTS (SELECT 1 FROM app_store.subscriptions s
                    WHERE s.bundle_id = n.bundle_id AND s.environment = n.environment AND s.original_transaction_id = n.original_transaction_id)
            GROUP BY 1 ORDER BY 1 LIMIT \(limit)
            """,
            logger: logger
        )
        var found: [(customer: String, needsTransactionHistory: Bool)] = []
        for try await (customer, needsHistory) in rows.decode((String, Bool).self) { found.append((customer, needsHistory)) }
        return found
    }

    /// The ledger views of up to `limit` subscription customers of this environment after
    /// `cursor`, in order: the gap rules stream through the whole ledger this way, a chunk at a
    /// time. Each view carries its account's last verifications and when each row was recorded,
    /// so that the rules look only at what is newer than the verification that covers it.
    package func customerViews(pair: AppStorePair, after cursor: String?, limit: Int) async throws -> [CustomerLedgerView] {
        let start = cursor ?? ""
        var views: [CustomerLedgerView] = []
        let rows = try await client.query(
            """
            SELECT m.account_id, a.verified_at, a.transactions_verified_at, \(unescaped: SubscriptionRecord.selectList(prefix: "s"))
            FROM app_store.subscriptions s
            LEFT JOIN app_store.account_members m ON m.bundle_id = s.bundle_id AND m.environment = s.environment AND m.original_transaction_id = s.original_transaction_id
            LEFT JOIN app_store.accounts a ON a.bundle_id = m.bundle_id AND a.environment = m.environment AND a.account_id = m.account_id
            WHERE s.bundle_id = \(pair.bundleId) AND s.environment = \(pair.environment.rawValue) AND s.original_transaction_id > \(start)
            ORDER BY s.original_transaction_id LIMIT \(limit)
            """,
            logger: logger
        )
        for try await row in rows {
            let cells = Array(row)
            let subscription = try SubscriptionRecord.read(cells, from: 3)
            views.append(
                CustomerLedgerView(
                    originalTransactionId: subscription.originalTransactionId, subscription: subscription, transactions: [], notifications: [],
                    accountId: try cells[0].decode(String?.self), verifiedAt: try cells[1].decode(Date?.self),
                    transactionsVerifiedAt: try cells[2].decode(Date?.self)
                )
            )
        }
        let ids = views.map(\.originalTransactionId)
        guard !ids.isEmpty else { return [] }
        var position: [String: Int] = [:]
        for (index, id) in ids.enumerated() { position[id] = index }
        let transactionRows = try await client.query(
            """
            SELECT original_transaction_id, transaction_id, product_type, purchase_date, expires_date, revocation_date, signed_date, updated_at, is_upgraded
            FROM app_store.transactions WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND original_transaction_id = ANY(\(ids)) ORDER BY purchase_date
            """,
            logger: logger
        )
        for try await row in transactionRows.decode((String, String, String?, Date?, Date?, Date?, Date, Date, Bool?).self) {
            guard let index = position[row.0] else { continue }
            views[index].transactions.append(
                .init(
                    transactionId: row.1, productType: row.2, purchaseDate: row.3, expiresDate: row.4, revocationDate: row.5, signedDate: row.6,
                    recordedAt: row.7, isUpgraded: row.8
                )
            )
        }
        let notificationRows = try await client.query(
            """
            SELECT original_transaction_id, notification_type, subtype, signed_date, recorded_at FROM app_store.notifications
            WHERE original_transaction_id = ANY(\(ids)) AND bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) ORDER BY signed_date
            """,
            logger: logger
        )
        for try await row in notificationRows.decode((String, String, String?, Date, Date).self) {
            guard let index = position[row.0] else { continue }
            views[index].notifications.append(.init(type: row.1, subtype: row.2, signedDate: row.3, recordedAt: row.4))
        }
        return views
    }

    // MARK: Runs

    package func startRun(kind: RunKind, pair: AppStorePair, windowStart: Date?, windowEnd: Date?, shard: String? = nil) async throws -> UUID {
        let id = UUID()
        let host = ProcessInfo.processInfo.hostName
        let pid = Int(ProcessInfo.processInfo.processIdentifier)
        try await client.query(
            """
            INSERT INTO app_store.runs (run_id, kind, bundle_id, environment, window_start, window_end, dry_run, host, pid, shard)
            VALUES (\(id), \(kind.rawValue), \(pair.bundleId), \(pair.environment.rawValue), \(windowStart), \(windowEnd), false, \(host), \(pid), \(shard))
            """,
            logger: logger
        )
        return id
    }

    /// Marks `abandoned` the recovering runs of this App Store and shard still recorded as running: called by a
    /// run that holds the shard's run lock, so their processes are gone (killed, machine lost).
    @discardableResult
    package func abandonDeadRuns(pair: AppStorePair, kinds: [RunKind] = [.run, .nightly], shard: String?) async throws -> Int {
        let rows = try await client.query(
            """
            UPDATE app_store.runs SET outcome = 'abandoned', finished_at = now()
            WHERE outcome = 'running' AND bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue)
              AND kind = ANY(\(kinds.map(\.rawValue))) AND shard IS NOT DISTINCT FROM \(shard)
            RETURNING run_id
            """,
            logger: logger
        )
        var count = 0
        for try await _ in rows.decode(UUID.self) { count += 1 }
        return count
    }

    /// Records how a run ended; `counts` is its summary as a JSON object.
    package func finishRun(_ id: UUID, outcome: RunOutcome, countsJSON: String) async throws {
        try await client.query(
            """
            UPDATE app_store.runs SET finished_at = now(), outcome = \(outcome.rawValue), counts = \(countsJSON)::jsonb
            WHERE run_id = \(id)
            """,
            logger: logger
        )
    }
}
