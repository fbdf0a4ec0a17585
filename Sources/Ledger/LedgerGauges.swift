import Decisions
package import Foundation
import LedgerModel
import Logging
import PostgresNIO
package import SignedData

/// What `serve`'s `/metrics` reads from the ledger at each scrape, for the alerts a team needs
/// wherever its jobs run (a Kubernetes CronJob has no textfile collector): when each kind of run
/// last succeeded for each configured App Store, and the refund requests still to answer with the
/// soonest deadline, and the subscriptions Apple owes a notification it has not sent (issue 64:
/// a webhook losing notifications is seen within the hour), and the newest audit's bound. Four indexed queries, whatever the
/// ledger's size; `serve` reads them at most
/// once per `LedgerGaugeCache` interval, whoever scrapes.
package struct LedgerGauges: Hashable, Sendable {
    package struct RunKey: Hashable, Sendable {
        package var kind: String
        package var pair: AppStorePair

        package init(kind: String, pair: AppStorePair) {
            self.kind = kind
            self.pair = pair
        }
    }

    package struct Unanswered: Hashable, Sendable {
        package var count: Int
        /// The soonest deadline still ahead.
        package var nextDeadline: Date

        package init(count: Int, nextDeadline: Date) {
            self.count = count
            self.nextDeadline = nextDeadline
        }
    }

    /// The newest successful run's end, by kind and App Store (the kinds a team schedules).
    package var lastSuccess: [RunKey: Date] = [:]
    /// Refund requests not yet answered whose deadline is still ahead, by App Store.
    package var unansweredConsumptionRequests: [AppStorePair: Unanswered] = [:]
    /// Subscriptions Apple owes a notification past `overdueAfter` (`LedgerStore.overdueCounts`),
    /// by App Store; absent: none.
    package var overdueSubscriptions: [AppStorePair: Int] = [:]
    /// The newest audit's upper bound (95%) of the share of accounts that differ from Apple
    /// (`LedgerStore.auditBounds`), by App Store; absent: never audited.
    package var auditDriftUpperBound: [AppStorePair: Double] = [:]
    /// The bytes of WAL each logical replication slot of the ledger's database (the outbox's
    /// readers) holds back, by name (`pg_replication_slots`). Empty: no slot, or a standby.
    package var outboxSlotLagBytes: [String: Int64] = [:]

    package init(
        lastSuccess: [RunKey: Date] = [:], unansweredConsumptionRequests: [AppStorePair: Unanswered] = [:], overdueSubscriptions: [AppStorePair: Int] = [:],
        auditDriftUpperBound: [AppStorePair: Double] = [:], outboxSlotLagBytes: [String: Int64] = [:]
    ) {
        self.outboxSlotLagBytes = outboxSlotLagBytes
        self.lastSuccess = lastSuccess
        self.unansweredConsumptionRequests = unansweredConsumptionRequests
        self.overdueSubscriptions = overdueSubscriptions
        self.auditDriftUpperBound = auditDriftUpperBound
    }

    /// The kinds whose last success is exposed: the scheduled ones.
    package static let scheduledKinds = [RunKind.nightly.rawValue, RunKind.consumptionRequests.rawValue]
}

extension LedgerStore {
    /// The ledger's figures for `pairs` (the configured App Stores only: rows of others add no series).
    package func gauges(for pairs: [AppStorePair], now: Date, overdueAfter: TimeInterval = GapRules.defaultOverdueAfter) async throws -> LedgerGauges {
        var gauges = LedgerGauges()
        let configured = Set(pairs)
        // The newest of each (App Store, kind, outcome): a few index lookups (runs_app_kind_finished_idx),
        // however many runs the ledger keeps.
        let ordered = pairs.sorted()
        let runs = try await client.query(
            """
            SELECT k.kind, p.bundle_id, p.environment, max(r.finished_at)
            FROM unnest(\(ordered.map(\.bundleId))::text[], \(ordered.map(\.environment.rawValue))::text[]) AS p(bundle_id, environment)
            CROSS JOIN unnest(\(LedgerGauges.scheduledKinds)::text[]) AS k(kind)
            CROSS JOIN unnest(ARRAY['succeeded', 'succeeded_with_rejections']) AS o(outcome)
            CROSS JOIN LATERAL (
                SELECT finished_at FROM app_store.runs
                WHERE bundle_id = p.bundle_id AND environment = p.environment AND kind = k.kind AND outcome = o.outcome AND finished_at IS NOT NULL
                ORDER BY finished_at DESC LIMIT 1
            ) r
            GROUP BY k.kind, p.bundle_id, p.environment
            """,
            logger: logger
        )
        for try await (kind, bundleId, environment, finished) in runs.decode((String, String, String, Date?).self) {
            guard let finished else { continue }
            let pair = AppStorePair(bundleId: bundleId, environment: AppStoreEnvironment(rawValue: environment))
            if configured.contains(pair) { gauges.lastSuccess[LedgerGauges.RunKey(kind: kind, pair: pair)] = finished }
        }
        let requests = try await client.query(
            """
            SELECT bundle_id, environment, count(*), min(deadline_date) FROM app_store.consumption_requests c
            WHERE answered_date IS NULL AND deadline_date > \(now) AND \(unescaped: LedgerStore.undecided)
            GROUP BY bundle_id, environment
            """,
            logger: logger
        )
        for try await (bundleId, environment, count, deadline) in requests.decode((String, String, Int, Date).self) {
            let pair = AppStorePair(bundleId: bundleId, environment: AppStoreEnvironment(rawValue: environment))
            if configured.contains(pair) { gauges.unansweredConsumptionRequests[pair] = .init(count: count, nextDeadline: deadline) }
        }
        gauges.overdueSubscriptions = try await overdueCounts(for: pairs, now: now, after: overdueAfter)
        gauges.auditDriftUpperBound = try await auditBounds(for: pairs).mapValues(\.upperBound)
        let slots = try await client.query(
            """
            SELECT slot_name::text, pg_wal_lsn_diff(pg_current_wal_lsn(), coalesce(confirmed_flush_lsn, restart_lsn))::bigint
            FROM pg_replication_slots
            WHERE slot_type = 'logical' AND database = current_database() AND NOT pg_is_in_recovery()
            """,
            logger: logger
        )
        for try await (slot, lag) in slots.decode((String, Int64?).self) {
            if let lag { gauges.outboxSlotLagBytes[slot] = lag }
        }
        return gauges
    }
}
