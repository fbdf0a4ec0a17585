import Foundation
import Logging
import PostgresNIO
package import SignedData

/// Pass 2's reads and writes per Apple account: what the ledger knows of an account, and the
/// account as a repair left it (membership, verification, revision token).
extension LedgerStore {
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
                -- Verified now: the times are set (now()) exactly when the account was verified.
                apple_answer = CASE WHEN EXCLUDED.verified_at IS NOT NULL THEN EXCLUDED.apple_answer ELSE app_store.accounts.apple_answer END,
                verified_at = coalesce(EXCLUDED.verified_at, app_store.accounts.verified_at),
                transactions_verified_at = coalesce(EXCLUDED.transactions_verified_at, app_store.accounts.transactions_verified_at),
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
}
