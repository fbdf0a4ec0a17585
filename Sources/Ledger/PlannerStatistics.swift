import Logging
import PostgresNIO

/// Whether PostgreSQL's statistics of the ledger's tables are stale after a pass that wrote
/// `written` rows into tables it estimates at `estimatedRows` (`pg_class.reltuples`; −1 when
/// the table was never analyzed).
///
/// Pass 2 reads an account's rows by `(bundle_id, environment, original_transaction_id)`. When a
/// large pass 1 has just filled a young ledger, autovacuum has not analyzed it yet (it looks once
/// a minute), and without statistics the planner takes the primary key's two equal columns for
/// more selective than the customer's index: every account's read walks every row of the App
/// Store. Measured (benchmark part 3, 14,657 notifications into an empty ledger): 20–30 ms per
/// read instead of under 1 ms, pass 2 at 77 accounts/s. The rule is autovacuum's own (50 rows
/// plus a tenth of the table), applied at once rather than within the minute.
package struct PlannerStatistics: Hashable, Sendable {
    package var written: Int
    package var estimatedRows: Double

    package init(written: Int, estimatedRows: Double) {
        self.written = written
        self.estimatedRows = estimatedRows
    }

    package var areStale: Bool {
        written > 50 + Int(max(estimatedRows, 0) / 10)
    }
}

extension LedgerStore {
    /// Analyzes the tables pass 2 reads an account from when `written` rows made their statistics stale; true when
    /// it did. A role that does not own the tables gets PostgreSQL's warning and changes nothing:
    /// not a failure.
    @discardableResult
    package func refreshPlannerStatistics(written: Int) async throws -> Bool {
        guard written > 0 else { return false }
        let estimated = try await client.query(
            "SELECT coalesce(max(reltuples), -1)::float8 FROM pg_class WHERE oid = to_regclass('app_store.transaction_rows')",
            logger: logger
        ).collect().first?.decode(Double.self) ?? -1
        guard PlannerStatistics(written: written, estimatedRows: estimated).areStale else { return false }
        let started = ContinuousClock.now
        try await client.query(
            "ANALYZE app_store.notification_rows, app_store.transaction_rows, app_store.subscriptions, app_store.account_members, app_store.accounts",
            logger: logger)
        logger.info(
            "analyzed the ledger's tables after a large pass 1",
            metadata: ["written": "\(written)", "estimated_rows": "\(Int(estimated))", "took": "\(ContinuousClock.now - started)"])
        return true
    }
}
