import Foundation
import Ledger
import Logging
import PostgresNIO
import Reconciliation
import SignedData
import ThrowawayPostgres

/// Issue 64's benchmark (part 13): what Apple owes, on a ledger of a million subscriptions. The
/// rows are made by SQL (`generate_series`), not by runs: fixture data whose `due_at` is set the
/// way the writer sets it for an active subscription renewing automatically (its expiry), one in
/// `overdueEvery` overdue. Measured: the time `LedgerStore.overdueCounts` (serve's gauge, status)
/// and the view `app_store.overdue_subscriptions` take (the median of several reads, after one to
/// warm the cache), the blocks each read touches (EXPLAIN ANALYZE BUFFERS: an index range scan
/// reads the overdue rows, not the ledger), and `migrate`'s fill of what rows written before
/// migration 0029 owe (`DueBackfill`), per 1,000 rows.
struct OverdueAtScale {
    var subscriptions = 1_000_000
    var overdueEvery = 1_000
    var reads = 7
    let logger: Logger

    func measure() async throws -> [Row] {
        let cluster = try ThrowawayPostgres.start()
        defer { cluster.stop() }
        return try await LedgerDatabase.withClient(try DatabaseURL(cluster.url()), logger: logger) { client in
            _ = try await Migrator().migrate(client, logger: logger)
            let started = ContinuousClock.now
            try await client.query(
                """
                INSERT INTO app_store.subscriptions (bundle_id, environment, original_transaction_id, product_id, status, expires_date,
                    auto_renew_status, last_signed_date, due_at, expected)
                SELECT 'com.example.scale', CASE WHEN i % 10 = 0 THEN 'Sandbox' ELSE 'Production' END, (2000000000000000 + i)::text, 'monthly', 1,
                    e, 1, e - interval '30 days', e, 'renewal_or_failure'
                FROM generate_series(1, \(subscriptions)) AS i,
                    LATERAL (SELECT CASE WHEN i % \(overdueEvery) = 0 THEN now() - interval '3 hours' ELSE now() + (i % 2592000) * interval '1 second' END AS e) d
                """,
                logger: logger
            )
            try await client.query("ANALYZE app_store.subscriptions", logger: logger)
            let filled = ContinuousClock.now - started
            let overdue = subscriptions / overdueEvery
            var rows: [Row] = []
            let pairs = [
                AppStorePair(bundleId: "com.example.scale", environment: .production), AppStorePair(bundleId: "com.example.scale", environment: .sandbox),
            ]
            var counted = 0
            let countTimes = try await timed(reads) {
                counted = try await LedgerStore(client: client, logger: logger).overdueCounts(for: pairs, now: Date(), after: 3600).values.reduce(0, +)
            }
            rows.append(Row(section: "overdue at \(subscriptions / 1000)k", figure: "ledger filled (SQL, not runs): \(subscriptions) subscriptions, \(overdue) overdue", value: Self.seconds(filled)))
            rows.append(
                Row(
                    section: "overdue at \(subscriptions / 1000)k", figure: "overdueCounts (serve's gauge, status): median of \(reads) reads, counted \(counted)",
                    value: Self.milliseconds(countTimes), target: "< 100 ms", met: counted == overdue && countTimes < .milliseconds(100)
                )
            )
            var viewed = 0
            let viewTimes = try await timed(reads) {
                for try await count in try await client.query("SELECT count(*)::int FROM app_store.overdue_subscriptions", logger: logger).decode(Int.self) {
                    viewed = count
                }
            }
            rows.append(
                Row(
                    section: "overdue at \(subscriptions / 1000)k", figure: "SELECT count(*) FROM app_store.overdue_subscriptions: median, counted \(viewed)",
                    value: Self.milliseconds(viewTimes), target: "< 100 ms", met: viewed == overdue && viewTimes < .milliseconds(100)
                )
            )
            var plan: [String] = []
            for try await line in try await client.query(
                "EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) SELECT count(*) FROM app_store.overdue_subscriptions", logger: logger
            ).decode(String.self) { plan.append(line) }
            let usesIndex = plan.contains { $0.contains("subscriptions_due_idx") }
            let buffers = plan.first { $0.contains("Buffers:") }?.trimmingCharacters(in: .whitespaces) ?? "?"
            rows.append(
                Row(
                    section: "overdue at \(subscriptions / 1000)k", figure: "the view's plan: \(usesIndex ? "subscriptions_due_idx range scan" : "NOT the index"), \(buffers)",
                    value: usesIndex ? "index" : "scan", target: "index", met: usesIndex
                )
            )
            rows += try await auditSampling(client, pairs: pairs)
            // migrate's fill, as for a ledger written before 0029.
            try await client.query("UPDATE app_store.subscriptions SET due_at = NULL, expected = NULL", logger: logger)
            try await client.query("VACUUM ANALYZE app_store.subscriptions", logger: logger)
            let fillStart = ContinuousClock.now
            let backfilled = try await client.withConnection { try await DueBackfill().run(on: $0, logger: logger) }
            let fill = ContinuousClock.now - fillStart
            let perThousand = Self.secondsValue(fill) * 1000 / Double(max(1, backfilled))
            rows.append(
                Row(
                    section: "overdue at \(subscriptions / 1000)k", figure: "migrate's fill of rows written before 0029 (DueBackfill): \(backfilled) rows in \(Self.seconds(fill))",
                    value: String(format: "%.1f ms per 1,000 rows", perThousand * 1000), met: backfilled == subscriptions
                )
            )
            return rows
        }
    }

    /// Issue 64, point 2: the audit's sampling on the same ledger (Production holds nine rows in
    /// ten of the sample keys' range, Sandbox one in ten: probed both). Measured: the median time
    /// of a draw of 300 (the nightly's) and of 3,000 accounts, the keys it looked up (its memory:
    /// a number a key), and one statement of probes explained: its plan and the blocks it touched,
    /// beside the table's.
    func auditSampling(_ client: PostgresClient, pairs: [AppStorePair]) async throws -> [Row] {
        let store = LedgerStore(client: client, logger: logger)
        var rows: [Row] = []
        var tablePages = 0
        for try await pages in try await client.query(
            "SELECT (pg_relation_size('app_store.subscriptions') / current_setting('block_size')::int)::int", logger: logger
        ).decode(Int.self) { tablePages = pages }
        for (pair, wanted) in [(pairs[0], 300), (pairs[0], 3_000), (pairs[1], 3_000)] {
            var drawn = (ids: [String](), wholeLedger: false, cost: LedgerAudit.DrawCost())
            let times = try await timed(reads) { drawn = try await LedgerAudit.draw(wanted, pair: pair, store: store) }
            let distinct = Set(drawn.ids).count
            rows.append(
                Row(
                    section: "overdue at \(subscriptions / 1000)k",
                    figure: "audit sample of \(wanted) \(pair.environment.rawValue) accounts: \(distinct) drawn with \(drawn.cost.probes) keys in \(drawn.cost.lookups) lookups "
                        + "(the sampler holds a number per key), \(drawn.cost.rowsRead) rows read",
                    value: Self.milliseconds(times), target: "< 1 s, no full read", met: distinct == wanted && drawn.cost.rowsRead == 0 && times < .seconds(1)
                )
            )
        }
        // One statement of probes, explained: the index, and the blocks it touches beside the table's.
        guard let range = try await store.sampleKeyRange(pair: pairs[0]) else { return rows }
        let keys = (0..<LedgerStore.sampleKeysPerStatement).map { _ in Int64.random(in: range.lowest...range.highest) }
        var plan: [String] = []
        for try await line in try await client.query(LedgerStore.sampleProbe(keys, pair: pairs[0], explain: true), logger: logger).decode(String.self) {
            plan.append(line)
        }
        let usesIndex = plan.contains { $0.contains("subscriptions_sample_key_idx") }
        let buffers = plan.first { $0.contains("Buffers:") }?.trimmingCharacters(in: .whitespaces) ?? "?"
        let touched = buffers.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }.reduce(0, +)
        rows.append(
            Row(
                section: "overdue at \(subscriptions / 1000)k",
                figure: "a statement of \(keys.count) probes: \(usesIndex ? "subscriptions_sample_key_idx" : "NOT the index"), \(buffers) (the table: \(tablePages) blocks)",
                value: String(format: "%.1f block reads per probe", Double(touched) / Double(keys.count)), target: "index, ≤ 6 per probe (its descent and the row)",
                met: usesIndex && Double(touched) / Double(keys.count) <= 6
            )
        )
        return rows
    }

    /// The median of `count` timed runs of `body`, after one untimed run (the cache warmed).
    func timed(_ count: Int, _ body: () async throws -> Void) async throws -> Duration {
        try await body()
        var times: [Duration] = []
        for _ in 0..<max(1, count) {
            let start = ContinuousClock.now
            try await body()
            times.append(ContinuousClock.now - start)
        }
        return times.sorted()[times.count / 2]
    }

    static func secondsValue(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func seconds(_ duration: Duration) -> String { String(format: "%.1f s", secondsValue(duration)) }
    static func milliseconds(_ duration: Duration) -> String { String(format: "%.1f ms", secondsValue(duration) * 1000) }
}
