import Decisions
import Foundation
import LedgerModel
import NIOCore
import PostgresNIO
import SignedData

extension LedgerStore {
    /// The statement that writes a batch's notifications (new ones only), transactions and
    /// subscriptions (newer signed versions only), the checkpoint, for a run the before → after
    /// of the subscriptions it did change, and the re-deliveries of the new notifications (when
    /// the batch has a target); it returns what each write changed, as (kind, key) rows
    /// (`Written`). It also sets the transaction's `app_store.change_context` (why the rows
    /// change, for the change feed's row triggers of migration 0007, which fire at the end of
    /// the statement).
    ///
    /// Values are bound by name: each table's rows are one JSON array whose keys are the
    /// columns' (`NotificationRecord.columns` …, read by `jsonb_to_recordset`), the statement's
    /// own values one JSON object (`Options`); only the signed objects' payloads and signatures,
    /// the bulk of a page, travel as arrays of bytea. Twelve parameters, whatever a table gains.
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

        /// The parameters, by position: each a JSON document of named values but the last two.
        enum Parameter: Int, CaseIterable {
            /// `{"run_id":…,"repair":…,"deliver_to":…,"refund_decisions":[uuid,…]}`.
            case options = 1
            /// The change feed's context (`ChangeFeed.context`).
            case changeContext
            /// `[]`, or the checkpoint's one row (times as microseconds since 2000, as a bound
            /// timestamptz would carry them: the key of the row `RunCheckpoints` reads back).
            case checkpoint
            case notifications, consumptionRequests, transactions, subscriptions
            /// `[{"original_transaction_id":…,"before":{…},"after":{…}},…]`.
            case subscriptionChanges
            case headers, objects
            /// bytea[]: the signed objects' payloads and signatures, in the objects' order.
            case payloads, signatures

            var sql: String {
                switch self {
                case .payloads, .signatures: "$\(rawValue)::bytea[]"
                default: "$\(rawValue)::text::jsonb"
                }
            }

            var dataType: PostgresDataType {
                switch self {
                case .payloads, .signatures: .byteaArray
                default: .text
                }
            }
        }

        /// The statement: the checkpoint and what the batch records (`recordsSQL`), the rows it
        /// writes (`rowsSQL`), the run's changes and deliveries and what it reports (`changesSQL`).
        static let sql: String = recordsSQL + rowsSQL + changesSQL

        static let options = Parameter.options.sql
        static let runId = "(\(options)->>'run_id')::uuid"
        static let repair = "(\(options)->>'repair')::boolean"

        /// The checkpoint, the notifications, and the refund requests and decisions they carry.
        static let recordsSQL: String = {
            let time = { (name: String) in "timestamptz '2000-01-01 00:00:00+00' + c.\(name) * interval '1 microsecond'" }
            return """
                WITH checkpoint AS (
                    INSERT INTO app_store.run_checkpoints (bundle_id, environment, window_start, window_end, only_failures, shard, query, position,
                        pagination_token, completed, run_id)
                    SELECT c.bundle_id, c.environment, \(time("window_start_us")), \(time("window_end_us")), c.only_failures, c.shard, c.query,
                        c.position, c.pagination_token, c.completed, \(runId)
                    FROM jsonb_to_recordset(\(Parameter.checkpoint.sql)) AS c(bundle_id text, environment text, window_start_us bigint,
                        window_end_us bigint, only_failures boolean, shard text, query text, position integer, pagination_token text, completed boolean)
                    ON CONFLICT (bundle_id, environment, window_start, window_end, only_failures, shard, query) DO UPDATE SET
                        position = EXCLUDED.position, pagination_token = EXCLUDED.pagination_token, completed = EXCLUDED.completed,
                        run_id = EXCLUDED.run_id, updated_at = now()
                    RETURNING 1
                ), inserted_notifications AS (
                    INSERT INTO app_store.notification_rows (\(NotificationRecord.selectList()), signed_payload_key)
                    SELECT \(NotificationRecord.values(from: "r")), decode(r.object_key, 'hex')
                    FROM jsonb_to_recordset(\(Parameter.notifications.sql)) AS r(\(NotificationRecord.recordsetTypes), object_key text)
                    ON CONFLICT (notification_uuid) DO NOTHING
                    RETURNING notification_uuid, notification_type, bundle_id, environment, transaction_id, signed_date
                ), recorded_consumption_requests AS (
                    INSERT INTO app_store.consumption_requests (\(ConsumptionRequestRecord.selectList()))
                    SELECT \(ConsumptionRequestRecord.values(from: "r"))
                    FROM jsonb_to_recordset(\(Parameter.consumptionRequests.sql)) AS r(\(ConsumptionRequestRecord.recordsetTypes))
                    JOIN inserted_notifications USING (notification_uuid)
                    -- A request naming its transaction gets its row when its episode is settled
                    -- (after this statement): only an episode's first request has one.
                    WHERE r.transaction_id IS NULL
                    ON CONFLICT (notification_uuid) DO NOTHING
                    RETURNING 1
                ), recorded_request_events AS (
                    INSERT INTO app_store.refund_request_events (kind, signed_date, \(ConsumptionRequestRecord.selectList()))
                    SELECT 'request', i.signed_date, \(ConsumptionRequestRecord.values(from: "r"))
                    FROM jsonb_to_recordset(\(Parameter.consumptionRequests.sql)) AS r(\(ConsumptionRequestRecord.recordsetTypes))
                    JOIN inserted_notifications i USING (notification_uuid)
                    WHERE r.transaction_id IS NOT NULL
                    ON CONFLICT (notification_uuid) DO NOTHING
                    RETURNING 1
                ), recorded_decision_events AS (
                    INSERT INTO app_store.refund_request_events (notification_uuid, kind, bundle_id, environment, transaction_id, signed_date)
                    SELECT i.notification_uuid, 'decision', i.bundle_id, i.environment, i.transaction_id, i.signed_date
                    FROM inserted_notifications i
                    WHERE i.notification_uuid IN (SELECT d::uuid FROM jsonb_array_elements_text(\(options)->'refund_decisions') AS d)
                        AND i.transaction_id IS NOT NULL
                    ON CONFLICT (notification_uuid) DO NOTHING
                    RETURNING 1
                """
        }()

        /// The transactions and subscriptions, and the signed objects of what was written.
        static let rowsSQL: String = """
                ), written_transactions AS (
                    INSERT INTO app_store.transaction_rows (\(TransactionRecord.selectList()), signed_transaction_key)
                    SELECT \(TransactionRecord.values(from: "r")), decode(r.object_key, 'hex')
                    FROM jsonb_to_recordset(\(Parameter.transactions.sql)) AS r(\(TransactionRecord.recordsetTypes), object_key text)
                    ON CONFLICT (bundle_id, environment, transaction_id) DO UPDATE SET
                        \(TransactionRecord.updateList(table: "app_store.transaction_rows")),
                        signed_transaction_key = CASE WHEN \(transactionChanges) THEN EXCLUDED.signed_transaction_key
                            ELSE app_store.transaction_rows.signed_transaction_key END,
                        signed_transaction = CASE WHEN \(transactionChanges) THEN NULL
                            ELSE app_store.transaction_rows.signed_transaction END,
                        updated_at = CASE WHEN \(transactionChanges) THEN now() ELSE app_store.transaction_rows.updated_at END
                    WHERE app_store.transaction_rows.signed_date < EXCLUDED.signed_date
                        OR (\(repair) AND app_store.transaction_rows.signed_date = EXCLUDED.signed_date AND \(transactionChanges))
                    RETURNING transaction_id, updated_at = now() AS content_changed
                ), stored_headers AS (
                    INSERT INTO app_store.jws_headers (header_sha256, header)
                    SELECT decode(h.key, 'hex'), h.header FROM jsonb_to_recordset(\(Parameter.headers.sql)) AS h(key text, header text)
                    ON CONFLICT DO NOTHING
                    RETURNING 1
                ), stored_objects AS (
                    INSERT INTO app_store.signed_objects (jws_sha256, header_sha256, payload, signature, nested, whole)
                    SELECT decode(o.key, 'hex'), decode(o.header, 'hex'), CASE WHEN o.jws IS NULL THEN b.payload END,
                        CASE WHEN o.jws IS NULL THEN b.signature END, decode(o.nested, 'hex'), o.jws
                    FROM jsonb_to_recordset(\(Parameter.objects.sql)) AS o(ordinal bigint, key text, owner text, header text, nested text, jws text)
                    JOIN unnest(\(Parameter.payloads.sql), \(Parameter.signatures.sql)) WITH ORDINALITY AS b(payload, signature, ordinal) USING (ordinal)
                    WHERE o.owner IN (SELECT 'n:' || notification_uuid::text FROM inserted_notifications)
                        OR o.owner IN (SELECT 't:' || transaction_id FROM written_transactions WHERE content_changed)
                    ON CONFLICT DO NOTHING
                    RETURNING 1
                ), written_subscriptions AS (
                    INSERT INTO app_store.subscriptions (\(SubscriptionRecord.selectList()), due_at, expected)
                    SELECT \(SubscriptionRecord.values(from: "r")), timestamptz 'epoch' + r.due_ms * interval '1 millisecond', r.expected
                    FROM jsonb_to_recordset(\(Parameter.subscriptions.sql)) AS r(\(SubscriptionRecord.recordsetTypes), due_ms bigint, expected text)
                    ON CONFLICT (bundle_id, environment, original_transaction_id) DO UPDATE SET
                        \(SubscriptionRecord.updateList(table: "app_store.subscriptions")),
                        due_at = EXCLUDED.due_at, expected = EXCLUDED.expected,
                        updated_at = CASE WHEN \(subscriptionChanges) THEN now() ELSE app_store.subscriptions.updated_at END
                    WHERE app_store.subscriptions.last_signed_date < EXCLUDED.last_signed_date
                        OR (app_store.subscriptions.last_signed_date = EXCLUDED.last_signed_date
                            AND coalesce(app_store.subscriptions.renewal_signed_date, app_store.subscriptions.last_signed_date)
                                < EXCLUDED.renewal_signed_date)
                        OR (\(repair) AND app_store.subscriptions.last_signed_date = EXCLUDED.last_signed_date AND \(subscriptionChanges))
                    RETURNING original_transaction_id, updated_at = now() AS content_changed
                """

        /// The run's record of changes, the deliveries to queue, the change feed's context, and
        /// what was written, as (kind, key) rows.
        static let changesSQL: String = """
                ), changed_subscriptions AS (
                    SELECT original_transaction_id FROM written_subscriptions WHERE content_changed
                ), recorded_changes AS (
                    INSERT INTO app_store.run_subscription_changes (run_id, original_transaction_id, before, after)
                    SELECT \(runId), r.original_transaction_id, r.before, r.after
                    FROM jsonb_to_recordset(\(Parameter.subscriptionChanges.sql)) AS r(original_transaction_id text, before jsonb, after jsonb)
                    JOIN changed_subscriptions USING (original_transaction_id)
                    ON CONFLICT (run_id, original_transaction_id) DO UPDATE SET after = EXCLUDED.after
                    RETURNING 1
                ), queued_deliveries AS (
                    INSERT INTO app_store.deliveries (notification_uuid, target, run_id)
                    SELECT notification_uuid, \(options)->>'deliver_to', \(runId) FROM inserted_notifications
                    WHERE \(options)->>'deliver_to' IS NOT NULL
                    ON CONFLICT DO NOTHING
                    RETURNING 1
                ), context AS (
                    SELECT set_config('app_store.change_context', $\(Parameter.changeContext.rawValue)::text, true) AS value
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

        static let bindingDataTypes: [PostgresDataType] = Parameter.allCases.map(\.dataType)

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
            var values: [Parameter: String] = [:]
            values[.options] = RowJSON.object([
                "run_id": .text(runId?.uuidString),
                // Apple's answer to a repair, signed at the same time as the row but saying something
                // else, is the truth: content decides, not only the signing time (issue 48, point 9).
                "repair": .boolean(batch.cause == .repair),
                "deliver_to": .text(batch.deliverTo),
                // Apple's decisions on refund requests among the notifications (their type's policy).
                "refund_decisions": .uuids(notifications.filter { $0.refundEpisode == .decision }.map(\.notificationUUID)),
            ])
            values[.changeContext] = ChangeFeed.context(of: batch, runId: runId)
            values[.checkpoint] = checkpoint.map { point, scope in
                RowJSON.array([point], fields: { point in
                    [
                        "bundle_id": .text(scope.pair.bundleId), "environment": .text(scope.pair.environment.rawValue),
                        "window_start_us": .integer(Self.postgresMicroseconds(scope.windowStart)),
                        "window_end_us": .integer(Self.postgresMicroseconds(scope.windowEnd)),
                        "only_failures": .boolean(scope.onlyFailures), "shard": .text(scope.shard), "query": .text(point.query),
                        "position": .integer(Int64(Int32(clamping: point.position))), "pagination_token": .text(point.paginationToken),
                        "completed": .boolean(point.completed),
                    ]
                })
            } ?? "[]"
            values[.notifications] = RowJSON.array(notifications, extra: { ["object_key": .hex(objects.notificationKeys[$0])] })
            values[.consumptionRequests] = RowJSON.array(batch.consumptionRequests)
            values[.transactions] = RowJSON.array(transactions, extra: { ["object_key": .hex(objects.transactionKeys[$0])] })
            // What each row owes, by the rule (SubscriptionDue), written with it: every column it reads is replaced whole.
            values[.subscriptions] = RowJSON.array(subscriptions, extra: { SubscriptionDue.of(subscriptions[$0]).jsonFields })
            values[.subscriptionChanges] = RowJSON.array(changes)
            values[.headers] = objects.headersJSON
            values[.objects] = objects.objectsJSON
            var bindings = PostgresBindings(capacity: Parameter.allCases.count)
            for parameter in Parameter.allCases {
                switch parameter {
                case .payloads: bindings.append(objects.payloads)
                case .signatures: bindings.append(objects.signatures)
                default: bindings.append(values[parameter] ?? "[]")
                }
            }
            return bindings
        }

        /// A time as PostgresNIO binds a timestamptz (whole microseconds since 2000-01-01, truncated),
        /// so that the checkpoint's key equals the one `RunCheckpoints` binds when it reads it back.
        static func postgresMicroseconds(_ date: Date) -> Int64 {
            Int64(date.timeIntervalSince(Date(timeIntervalSince1970: 946_684_800)) * 1_000_000)
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            try row.decode(Row.self)
        }
    }
}
