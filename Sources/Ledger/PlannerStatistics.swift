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
    /// Analyzes the tables pass 2 reads an account from when `written` rows made their statistics
    /// stale; true when it did. An optimisation, never the run's fate: a role that does not own the
    /// tables skips it (PostgreSQL would only warn), a table another maintenance holds is skipped
    /// rather than waited for (SKIP_LOCKED), and any failure is logged, not thrown.
    @discardableResult
    package func refreshPlannerStatistics(written: Int) async -> Bool {
        guard written > 0 else { return false }
        do {
            guard
                let (estimated, owner) = try await client.query(
                    """
                    SELECT reltuples::float8, pg_has_role(relowner, 'USAGE') FROM pg_class
                    WHERE oid = to_regclass('app_store.transaction_rows')
                    """,
                    logger: logger
                ).collect().first?.decode((Double, Bool).self),
                PlannerStatistics(written: written, estimatedRows: estimated).areStale
            else { return false }
            guard owner else {
                logger.notice("the ledger's statistics are stale after a large pass 1, and this role does not own its tables to analyze them: pass 2 may be slow until autovacuum does")
                return false
            }
            let started = ContinuousClock.now
            try await client.query(
                """
                ANALYZE (SKIP_LOCKED) app_store.notification_rows, app_store.transaction_rows, app_store.subscriptions,
                    app_store.account_members, app_store.accounts
                """,
                logger: logger)
            logger.info(
                "analyzed the ledger's tables after a large pass 1",
                metadata: ["written": "\(written)", "estimated_rows": "\(Int(estimated))", "took": "\(ContinuousClock.now - started)"])
            return true
        } catch {
            logger.warning("the ledger's tables were not analyzed after a large pass 1 (pass 2 may be slow): \(String(reflecting: error).prefix(200))")
            return false
        }
    }
}
