import Foundation
import Logging
import PostgresNIO

/// The ledger's reads and writes. Every value reaches SQL as a bound parameter. Writes that
/// race a live webhook are settled by the database: a notification already recorded is left
/// alone, and transaction and subscription rows only move to information signed later.
public struct LedgerStore: Sendable {
    public let client: PostgresClient
    public let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    // MARK: Reads for the comparison (one query per batch)

    /// The columns of `app_store.subscriptions` in the order every query selects them.
    typealias SubscriptionRow = (String, String?, Int16?, Date?, Int16?, String?, Bool?, Date?, Date)

    static func subscription(_ row: SubscriptionRow) -> SubscriptionRecord {
        SubscriptionRecord(
            originalTransactionId: row.0, productId: row.1, status: row.2.map(Int.init), expiresDate: row.3,
            autoRenewStatus: row.4.map(Int.init), autoRenewProductId: row.5, isInBillingRetry: row.6,
            gracePeriodExpiresDate: row.7, lastSignedDate: row.8
        )
    }

    /// The stored subscription rows for these customers.
    public func subscriptions(_ originalTransactionIds: [String]) async throws -> [String: SubscriptionRecord] {
        try await Self.subscriptions(originalTransactionIds, on: client, logger: logger)
    }

    static func subscriptions(_ originalTransactionIds: [String], on database: some LedgerQuerying, logger: Logger) async throws -> [String: SubscriptionRecord] {
        guard !originalTransactionIds.isEmpty else { return [:] }
        let rows = try await database.ledgerQuery(
            """
            SELECT original_transaction_id, product_id, status, expires_date, auto_renew_status, auto_renew_product_id,
                   is_in_billing_retry, grace_period_expires_date, last_signed_date
            FROM app_store.subscriptions WHERE original_transaction_id = ANY(\(originalTransactionIds))
            """,
            logger: logger
        )
        var found: [String: SubscriptionRecord] = [:]
        for try await row in rows.decode(SubscriptionRow.self) { found[row.0] = Self.subscription(row) }
        return found
    }

    /// What the ledger holds for a page of notifications, in one statement (one round trip
    /// instead of three: under load each costs more than the query), prepared once per
    /// connection.
    public func pageState(notifications: [UUID], customers: [String], transactions: [String]) async throws -> PageLedgerState {
        var state = PageLedgerState(existingNotifications: [], subscriptions: [:], transactionSignedDates: [:])
        guard !notifications.isEmpty || !customers.isEmpty || !transactions.isEmpty else { return state }
        let rows = try await client.execute(
            PageStateRead(customers: customers, transactions: transactions, notifications: notifications), logger: logger
        )
        for try await row in rows {
            switch row.0 {
            case 1:
                guard let lastSigned = row.9 else { continue }
                state.subscriptions[row.1] = Self.subscription((row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8, lastSigned))
            case 2:
                if let signed = row.9 { state.transactionSignedDates[row.1] = signed }
            default:
                if let uuid = UUID(uuidString: row.1) { state.existingNotifications.insert(uuid) }
            }
        }
        return state
    }

    /// Kind 1 rows are subscriptions, kind 2 a transaction's ID and `signed_date`, kind 3 a
    /// notification's UUID.
    struct PageStateRead: PostgresPreparedStatement {
        typealias Row = (Int16, String, String?, Int16?, Date?, Int16?, String?, Bool?, Date?, Date?)

        static let sql = """
            SELECT 1::smallint, original_transaction_id, product_id, status, expires_date, auto_renew_status, auto_renew_product_id,
                   is_in_billing_retry, grace_period_expires_date, last_signed_date
            FROM app_store.subscriptions WHERE original_transaction_id = ANY($1::text[])
            UNION ALL
            SELECT 2::smallint, transaction_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, signed_date
            FROM app_store.transactions WHERE transaction_id = ANY($2::text[])
            UNION ALL
            SELECT 3::smallint, notification_uuid::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
            FROM app_store.notifications WHERE notification_uuid = ANY($3::uuid[])
            """

        static let bindingDataTypes: [PostgresDataType] = [.textArray, .textArray, .uuidArray]

        let customers: [String]
        let transactions: [String]
        let notifications: [UUID]

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 3)
            bindings.append(customers)
            bindings.append(transactions)
            bindings.append(notifications)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            try row.decode(Row.self)
        }
    }

    // MARK: Writes

    /// Writes a batch in one database transaction: all of it or nothing, and with it the
    /// checkpoint that says the batch is done, so progress never runs ahead of what is committed.
    ///
    /// The rows, the checkpoint and the run's record of changes are one statement (a statement
    /// is a transaction of its own), so a page of notifications costs one round trip; revisions
    /// and rejections, rare in a page, add their statements inside an explicit transaction.
    public func apply(_ batch: LedgerBatch, runId: UUID?, checkpoint: (QueryCheckpoint, CheckpointScope)? = nil) async throws -> LedgerBatchOutcome {
        guard !batch.isEmpty || checkpoint != nil else { return LedgerBatchOutcome() }
        let logger = self.logger
        let writesRows = !batch.notifications.isEmpty || !batch.transactions.isEmpty || !batch.subscriptions.isEmpty || checkpoint != nil
        let statement = RowsWrite(batch: batch, runId: runId, checkpoint: checkpoint)
        if batch.rejected.isEmpty && batch.revisions.isEmpty && batch.revisionsToForget.isEmpty {
            return try await client.withConnection { connection in
                try await Self.outcome(of: statement, on: connection, logger: logger)
            }
        }
        return try await client.withTransaction(logger: logger) { connection in
            let outcome = writesRows ? try await Self.outcome(of: statement, on: connection, logger: logger) : LedgerBatchOutcome()
            for (customer, revision) in batch.revisions.sorted(by: { $0.key < $1.key }) {
                try await connection.query(
                    """
                    INSERT INTO app_store.history_revisions (original_transaction_id, revision, fetched_at)
                    VALUES (\(customer), \(revision), now())
                    ON CONFLICT (original_transaction_id) DO UPDATE SET revision = EXCLUDED.revision, fetched_at = now()
                    """,
                    logger: logger
                )
            }
            for customer in batch.revisionsToForget where batch.revisions[customer] == nil {
                try await connection.query(
                    "DELETE FROM app_store.history_revisions WHERE original_transaction_id = \(customer)", logger: logger
                )
            }
            for record in batch.rejected {
                try await connection.query(
                    """
                    INSERT INTO app_store.rejected_payloads (run_id, source, notification_uuid, reason, detail, signed_payload)
                    VALUES (\(runId), \(record.source), \(record.notificationUUID), \(record.reason), \(record.detail), \(record.signedPayload))
                    """,
                    logger: logger
                )
            }
            return outcome
        }
    }

    /// Runs the batch's row statement and collects what it changed.
    private static func outcome(of statement: RowsWrite, on connection: PostgresConnection, logger: Logger) async throws -> LedgerBatchOutcome {
        var outcome = LedgerBatchOutcome()
        for try await (kind, key) in try await connection.execute(statement, logger: logger) {
            switch kind {
            case "n": if let uuid = UUID(uuidString: key) { outcome.insertedNotifications.insert(uuid) }
            case "t": outcome.changedTransactions.insert(key)
            default: outcome.changedSubscriptions.insert(key)
            }
        }
        return outcome
    }

    /// The statement that writes a batch's notifications (new ones only), transactions and
    /// subscriptions (newer signed versions only), the checkpoint, and, for a run, the before →
    /// after of the subscriptions it did change; it returns what each write changed, as
    /// (kind, key) rows: "n" notification UUID, "t" transaction ID, "s" customer. Data-modifying
    /// CTEs see the same snapshot and reach each other only through RETURNING, which is how the
    /// record of changes keeps to the subscriptions the upsert changed. Prepared once per
    /// connection: parsing and planning it for every page was on the critical path of pass 1.
    struct RowsWrite: PostgresPreparedStatement {
        typealias Row = (String, String)

        static let sql = """
            WITH checkpoint AS (
                INSERT INTO app_store.run_checkpoints (environment, window_start, window_end, only_failures, shard, query, position,
                    pagination_token, completed, run_id)
                SELECT $1::text, $2::timestamptz, $3::timestamptz,
                    $4::boolean, $5::text, $6::text, $7::integer,
                    $8::text, $9::boolean, $10::uuid
                WHERE $11::boolean
                ON CONFLICT (environment, window_start, window_end, only_failures, shard, query) DO UPDATE SET
                    position = EXCLUDED.position, pagination_token = EXCLUDED.pagination_token, completed = EXCLUDED.completed,
                    run_id = EXCLUDED.run_id, updated_at = now()
            ), inserted_notifications AS (
                INSERT INTO app_store.notifications (notification_uuid, notification_type, subtype, signed_date, environment,
                    original_transaction_id, transaction_id, signed_payload, source)
                SELECT notification_uuid, r.notification_type, r.subtype, timestamptz 'epoch' + r.signed_ms * interval '1 millisecond',
                    r.environment, r.original_transaction_id, r.transaction_id, p.payload, r.source
                FROM jsonb_to_recordset($12::text::jsonb) AS r(
                    notification_uuid uuid, notification_type text, subtype text, signed_ms bigint, environment text,
                    original_transaction_id text, transaction_id text, source text)
                JOIN unnest($13::uuid[], $14::text[])
                    AS p(notification_uuid, payload) USING (notification_uuid)
                ON CONFLICT (notification_uuid) DO NOTHING
                RETURNING notification_uuid
            ), changed_transactions AS (
                INSERT INTO app_store.transactions (transaction_id, original_transaction_id, product_id, product_type, purchase_date,
                    expires_date, revocation_date, revocation_reason, is_upgraded, signed_date, environment, signed_transaction)
                SELECT r.transaction_id, r.original_transaction_id, r.product_id, r.product_type,
                    timestamptz 'epoch' + r.purchase_ms * interval '1 millisecond', timestamptz 'epoch' + r.expires_ms * interval '1 millisecond',
                    timestamptz 'epoch' + r.revocation_ms * interval '1 millisecond', r.revocation_reason, r.is_upgraded,
                    timestamptz 'epoch' + r.signed_ms * interval '1 millisecond', r.environment, p.payload
                FROM jsonb_to_recordset($15::text::jsonb) AS r(
                    transaction_id text, original_transaction_id text, product_id text, product_type text, purchase_ms bigint,
                    expires_ms bigint, revocation_ms bigint, revocation_reason integer, is_upgraded boolean, signed_ms bigint,
                    environment text)
                JOIN unnest($16::text[], $17::text[])
                    AS p(transaction_id, payload) USING (transaction_id)
                ON CONFLICT (transaction_id) DO UPDATE SET
                    original_transaction_id = EXCLUDED.original_transaction_id, product_id = EXCLUDED.product_id,
                    product_type = EXCLUDED.product_type, purchase_date = EXCLUDED.purchase_date,
                    expires_date = EXCLUDED.expires_date, revocation_date = EXCLUDED.revocation_date,
                    revocation_reason = EXCLUDED.revocation_reason, is_upgraded = EXCLUDED.is_upgraded,
                    signed_date = EXCLUDED.signed_date, environment = EXCLUDED.environment,
                    signed_transaction = EXCLUDED.signed_transaction, updated_at = now()
                WHERE app_store.transactions.signed_date < EXCLUDED.signed_date
                RETURNING transaction_id
            ), changed_subscriptions AS (
                INSERT INTO app_store.subscriptions (original_transaction_id, product_id, status, expires_date, auto_renew_status,
                    auto_renew_product_id, is_in_billing_retry, grace_period_expires_date, last_signed_date)
                SELECT r.original_transaction_id, r.product_id, r.status, timestamptz 'epoch' + r.expires_ms * interval '1 millisecond',
                    r.auto_renew_status, r.auto_renew_product_id, r.is_in_billing_retry,
                    timestamptz 'epoch' + r.grace_period_expires_ms * interval '1 millisecond',
                    timestamptz 'epoch' + r.last_signed_ms * interval '1 millisecond'
                FROM jsonb_to_recordset($18::text::jsonb) AS r(
                    original_transaction_id text, product_id text, status smallint, expires_ms bigint, auto_renew_status smallint,
                    auto_renew_product_id text, is_in_billing_retry boolean, grace_period_expires_ms bigint, last_signed_ms bigint)
                ON CONFLICT (original_transaction_id) DO UPDATE SET
                    product_id = EXCLUDED.product_id, status = EXCLUDED.status, expires_date = EXCLUDED.expires_date,
                    auto_renew_status = EXCLUDED.auto_renew_status, auto_renew_product_id = EXCLUDED.auto_renew_product_id,
                    is_in_billing_retry = EXCLUDED.is_in_billing_retry,
                    grace_period_expires_date = EXCLUDED.grace_period_expires_date,
                    last_signed_date = EXCLUDED.last_signed_date, updated_at = now()
                WHERE app_store.subscriptions.last_signed_date < EXCLUDED.last_signed_date
                RETURNING original_transaction_id
            ), recorded_changes AS (
                INSERT INTO app_store.run_subscription_changes (run_id, original_transaction_id, before, after)
                SELECT $10::uuid, r.original_transaction_id, r.before, r.after
                FROM jsonb_to_recordset($19::text::jsonb) AS r(original_transaction_id text, before jsonb, after jsonb)
                JOIN changed_subscriptions USING (original_transaction_id)
                ON CONFLICT (run_id, original_transaction_id) DO UPDATE SET after = EXCLUDED.after
            )
            SELECT 'n', notification_uuid::text FROM inserted_notifications
            UNION ALL SELECT 't', transaction_id FROM changed_transactions
            UNION ALL SELECT 's', original_transaction_id FROM changed_subscriptions
            """

        static let bindingDataTypes: [PostgresDataType] = [
            .text, .timestamptz, .timestamptz, .bool, .text, .text, .int4, .text, .bool, .uuid, .bool,
            .text, .uuidArray, .textArray, .text, .textArray, .textArray, .text, .text,
        ]

        let batch: LedgerBatch
        let runId: UUID?
        let checkpoint: (QueryCheckpoint, CheckpointScope)?

        func makeBindings() throws -> PostgresBindings {
            let notifications = LedgerBatchRows.notifications(batch.notifications)
            let transactions = LedgerBatchRows.transactions(batch.transactions)
            let subscriptions = LedgerBatchRows.subscriptions(batch.subscriptions)
            // Every subscription's candidate record; the statement keeps those the upsert changed.
            let changes = runId == nil ? [] : subscriptions.map { after in
                LedgerBatchRows.SubscriptionChange(
                    original_transaction_id: after.original_transaction_id,
                    before: batch.subscriptionsBefore[after.original_transaction_id]?.map(LedgerBatchRows.subscription), after: after
                )
            }
            let scope = checkpoint?.1
            let point = checkpoint?.0
            var bindings = PostgresBindings(capacity: 19)
            bindings.append(scope?.environment)
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
            bindings.append(RowJSON.array(notifications.rows))
            bindings.append(batch.notifications.map(\.notificationUUID))
            bindings.append(notifications.payloads)
            bindings.append(RowJSON.array(transactions.rows))
            bindings.append(transactions.rows.map(\.transaction_id))
            bindings.append(transactions.payloads)
            bindings.append(RowJSON.array(subscriptions))
            bindings.append(RowJSON.array(changes))
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            try row.decode(Row.self)
        }
    }

    /// Up to `limit` of the subscriptions a run changed, after `cursor`, in order of
    /// originalTransactionId: before the run first changed each (nil: none) and as it left it.
    public func subscriptionChanges(ofRun runId: UUID, after cursor: String?, limit: Int) async throws
        -> [(customer: String, before: SubscriptionRecord?, after: SubscriptionRecord)]
    {
        let rows = try await client.query(
            """
            SELECT original_transaction_id, before::text, after::text FROM app_store.run_subscription_changes
            WHERE run_id = \(runId) AND original_transaction_id > \(cursor ?? "") ORDER BY original_transaction_id LIMIT \(limit)
            """,
            logger: logger
        )
        let decoder = JSONDecoder()
        var found: [(customer: String, before: SubscriptionRecord?, after: SubscriptionRecord)] = []
        for try await (customer, before, after) in rows.decode((String, String?, String).self) {
            let beforeRow = try before.map { try decoder.decode(LedgerBatchRows.Subscription.self, from: Data($0.utf8)) }
            let afterRow = try decoder.decode(LedgerBatchRows.Subscription.self, from: Data(after.utf8))
            found.append((customer, beforeRow.map(LedgerBatchRows.record), LedgerBatchRows.record(afterRow)))
        }
        return found
    }

    // MARK: Reads for repairs

    /// The stored Get Transaction History revision of a customer.
    public func revision(of customer: String) async throws -> String? {
        try await Self.revision(of: customer, on: client, logger: logger)
    }

    static func revision(of customer: String, on database: some LedgerQuerying, logger: Logger) async throws -> String? {
        let rows = try await database.ledgerQuery(
            "SELECT revision FROM app_store.history_revisions WHERE original_transaction_id = \(customer)", logger: logger
        )
        for try await revision in rows.decode(String.self) { return revision }
        return nil
    }

    /// The customer (originalTransactionId) a transaction ID belongs to, when the ledger knows it.
    public func customer(ofTransaction id: String) async throws -> String? {
        let rows = try await client.query(
            """
            SELECT original_transaction_id FROM app_store.transactions WHERE transaction_id = \(id)
            UNION ALL SELECT original_transaction_id FROM app_store.subscriptions WHERE original_transaction_id = \(id)
            LIMIT 1
            """,
            logger: logger
        )
        for try await customer in rows.decode(String.self) { return customer }
        return nil
    }

    /// A customer's stored transactions.
    public func transactions(ofCustomer customer: String) async throws -> [TransactionRecord] {
        try await Self.transactions(ofCustomer: customer, on: client, logger: logger)
    }

    /// What pass 2 compares with Apple's answer for one customer, read on one leased connection.
    public func customerState(_ customer: String) async throws -> StoredCustomerState {
        let logger = self.logger
        return try await client.withConnection { connection in
            StoredCustomerState(
                revision: try await Self.revision(of: customer, on: connection, logger: logger),
                subscription: try await Self.subscriptions([customer], on: connection, logger: logger)[customer],
                transactions: try await Self.transactions(ofCustomer: customer, on: connection, logger: logger)
            )
        }
    }

    static func transactions(ofCustomer customer: String, on database: some LedgerQuerying, logger: Logger) async throws -> [TransactionRecord] {
        let rows = try await database.ledgerQuery(
            """
            SELECT transaction_id, original_transaction_id, product_id, product_type, purchase_date, expires_date, revocation_date,
                   revocation_reason, is_upgraded, signed_date, environment, signed_transaction
            FROM app_store.transactions WHERE original_transaction_id = \(customer) ORDER BY purchase_date, transaction_id
            """,
            logger: logger
        )
        var found: [TransactionRecord] = []
        for try await row in rows.decode((String, String, String?, String?, Date?, Date?, Date?, Int?, Bool?, Date, String?, String).self) {
            found.append(
                TransactionRecord(
                    transactionId: row.0, originalTransactionId: row.1, productId: row.2, productType: row.3, purchaseDate: row.4,
                    expiresDate: row.5, revocationDate: row.6, revocationReason: row.7, isUpgraded: row.8, signedDate: row.9,
                    environment: row.10, signedTransaction: row.11
                )
            )
        }
        return found
    }

    // "Recovered" below: a notification from history (`source = 'history'`) signed in the
    // window, or recorded since the run `runId` started (in the database's own clock: what this
    // run, or another shard of it, recovered that was signed outside the window).

    /// Which of these customers have a notification recovered in the window (or since the run
    /// `runId` started).
    public func recoveredCustomers(among customers: [String], from start: Date, to end: Date, sinceRun runId: UUID?) async throws -> Set<String> {
        guard !customers.isEmpty else { return [] }
        let rows = try await client.query(
            """
            SELECT DISTINCT n.original_transaction_id FROM app_store.notifications n
            WHERE n.original_transaction_id = ANY(\(customers)) AND n.source = 'history' AND (
                (n.signed_date >= \(start) AND n.signed_date < \(end))
                OR n.recorded_at >= (SELECT started_at FROM app_store.runs WHERE run_id = \(runId)))
            """,
            logger: logger
        )
        var found: Set<String> = []
        for try await customer in rows.decode(String.self) { found.insert(customer) }
        return found
    }

    /// Customers without a subscription row (one-time purchases) with a notification recovered
    /// in the window (or since the run `runId` started): up to `limit` after `cursor`, in order.
    public func customersRecoveredWithoutSubscription(
        from start: Date, to end: Date, sinceRun runId: UUID?, after cursor: String?, limit: Int
    ) async throws -> [String] {
        let rows = try await client.query(
            """
            SELECT DISTINCT n.original_transaction_id FROM app_store.notifications n
            WHERE n.original_transaction_id > \(cursor ?? "") AND n.source = 'history' AND (
                (n.signed_date >= \(start) AND n.signed_date < \(end))
                OR n.recorded_at >= (SELECT started_at FROM app_store.runs WHERE run_id = \(runId)))
                AND NOT EXISTS (SELECT 1 FROM app_store.subscriptions s WHERE s.original_transaction_id = n.original_transaction_id)
            ORDER BY 1 LIMIT \(limit)
            """,
            logger: logger
        )
        var found: [String] = []
        for try await customer in rows.decode(String.self) { found.append(customer) }
        return found
    }

    /// The ledger views of up to `limit` subscription customers after `cursor`, in order: the
    /// gap rules stream through the whole ledger this way, a chunk at a time.
    public func customerViews(after cursor: String?, limit: Int) async throws -> [CustomerLedgerView] {
        let start = cursor ?? ""
        var subscriptions: [SubscriptionRecord] = []
        let rows = try await client.query(
            """
            SELECT original_transaction_id, product_id, status, expires_date, auto_renew_status, auto_renew_product_id,
                   is_in_billing_retry, grace_period_expires_date, last_signed_date
            FROM app_store.subscriptions WHERE original_transaction_id > \(start) ORDER BY original_transaction_id LIMIT \(limit)
            """,
            logger: logger
        )
        for try await row in rows.decode(SubscriptionRow.self) { subscriptions.append(Self.subscription(row)) }
        let ids = subscriptions.map(\.originalTransactionId)
        guard !ids.isEmpty else { return [] }
        var transactions: [String: [CustomerLedgerView.TransactionFacts]] = [:]
        let transactionRows = try await client.query(
            """
            SELECT original_transaction_id, transaction_id, product_type, purchase_date, expires_date, revocation_date, signed_date
            FROM app_store.transactions WHERE original_transaction_id = ANY(\(ids)) ORDER BY purchase_date
            """,
            logger: logger
        )
        for try await row in transactionRows.decode((String, String, String?, Date?, Date?, Date?, Date).self) {
            transactions[row.0, default: []].append(
                .init(transactionId: row.1, productType: row.2, purchaseDate: row.3, expiresDate: row.4, revocationDate: row.5, signedDate: row.6)
            )
        }
        var notifications: [String: [CustomerLedgerView.NotificationFacts]] = [:]
        let notificationRows = try await client.query(
            """
            SELECT original_transaction_id, notification_type, subtype, signed_date FROM app_store.notifications
            WHERE original_transaction_id = ANY(\(ids)) ORDER BY signed_date
            """,
            logger: logger
        )
        for try await row in notificationRows.decode((String, String, String?, Date).self) {
            notifications[row.0, default: []].append(.init(type: row.1, subtype: row.2, signedDate: row.3))
        }
        return subscriptions.map { subscription in
            CustomerLedgerView(
                originalTransactionId: subscription.originalTransactionId, subscription: subscription,
                transactions: transactions[subscription.originalTransactionId] ?? [],
                notifications: notifications[subscription.originalTransactionId] ?? []
            )
        }
    }

    // MARK: Runs

    public func startRun(kind: String, environment: String, windowStart: Date?, windowEnd: Date?, shard: String? = nil) async throws -> UUID {
        let id = UUID()
        let host = ProcessInfo.processInfo.hostName
        let pid = Int(ProcessInfo.processInfo.processIdentifier)
        try await client.query(
            """
            INSERT INTO app_store.runs (run_id, kind, environment, window_start, window_end, dry_run, host, pid, shard)
            VALUES (\(id), \(kind), \(environment), \(windowStart), \(windowEnd), false, \(host), \(pid), \(shard))
            """,
            logger: logger
        )
        return id
    }

    /// Marks `abandoned` the recovering runs of this shard still recorded as running: called by a
    /// run that holds the shard's run lock, so their processes are gone (killed, machine lost).
    @discardableResult
    public func abandonDeadRuns(shard: String?) async throws -> Int {
        let rows = try await client.query(
            """
            UPDATE app_store.runs SET outcome = 'abandoned', finished_at = now()
            WHERE outcome = 'running' AND kind IN ('run', 'nightly') AND shard IS NOT DISTINCT FROM \(shard)
            RETURNING run_id
            """,
            logger: logger
        )
        var count = 0
        for try await _ in rows.decode(UUID.self) { count += 1 }
        return count
    }

    /// Records how a run ended; `counts` is its summary as a JSON object.
    public func finishRun(_ id: UUID, outcome: String, countsJSON: String) async throws {
        try await client.query(
            """
            UPDATE app_store.runs SET finished_at = now(), outcome = \(outcome), counts = \(countsJSON)::jsonb
            WHERE run_id = \(id)
            """,
            logger: logger
        )
    }
}
