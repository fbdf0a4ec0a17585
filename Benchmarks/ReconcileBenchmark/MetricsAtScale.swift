import Foundation
import Ledger
import Logging
import PostgresNIO
import ThrowawayPostgres

/// Issue 65's benchmark (part 14): `appstore-reconcile metrics` for a year by day over a ledger of
/// a million subscriptions. The rows are made by SQL (`generate_series`), not by runs, with the
/// change feed's triggers off (`session_replication_role = replica`): one to twelve monthly
/// periods a subscription over the last 400 days, a free trial first in one in three, an annual
/// plan in one in ten, a Family Sharing member in one in twenty, a prorated refund of the last
/// period in one in twenty-five. Measured at two sizes, each in its own cluster: the command's wall
/// time and its peak memory (VmHWM, read while it runs), and the rows it gave. Goal: ≤ 30 s at a
/// million, memory flat (the database aggregates; the command holds a year of rows).
struct MetricsAtScale {
    var sizes = [100_000, 1_000_000]
    let binary: String
    let logger: Logger

    func measure() async throws -> [Row] {
        var rows: [Row] = []
        var peaks: [Int] = []
        for size in sizes {
            let cluster = try ThrowawayPostgres.start()
            defer { cluster.stop() }
            let url = cluster.url()
            let (filled, periods) = try await LedgerDatabase.withClient(try DatabaseURL(url), logger: logger) { client in
                _ = try await Migrator().migrate(client, logger: logger)
                let started = ContinuousClock.now
                try await fill(client, subscriptions: size)
                var periods = 0
                for try await count in try await client.query("SELECT count(*)::int FROM app_store.transaction_rows", logger: logger).decode(Int.self) { periods = count }
                return (ContinuousClock.now - started, periods)
            }
            let section = "metrics at \(size / 1000)k"
            rows.append(Row(section: section, figure: "ledger filled (SQL, not runs): \(size) subscriptions, \(periods) periods", value: OverdueAtScale.seconds(filled)))
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-bench-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let now = Date()
            let arguments = ["metrics", "--interval", "day", "--from", now.addingTimeInterval(-365 * 86_400).formatted(.iso8601), "--report-dir", directory]
            var environment = ProcessInfo.processInfo.environment
            environment["DATABASE_URL"] = url
            let started = ContinuousClock.now
            let child = try ChildProcess.spawn(binary, arguments, environment: environment)
            let peak = PeakMemory(pid: child.pid)
            Thread { peak.watch() }.start()
            let usage = await withCheckedContinuation { continuation in
                Thread { continuation.resume(returning: child.waitWithUsage()) }.start()
            }
            let took = ContinuousClock.now - started
            let written = (try? Data(contentsOf: URL(fileURLWithPath: directory + "/metrics.json"))).flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
            let count = (written?["rows"] as? [Any])?.count ?? 0
            peaks.append(peak.value)
            rows.append(
                Row(
                    section: section, figure: "metrics, a year by day (exit \(usage.status), \(count) rows, \(String(format: "%.1f", usage.cpuSeconds)) CPU-s in the command)",
                    value: OverdueAtScale.seconds(took), target: size >= 1_000_000 ? "≤ 30 s" : "", met: size >= 1_000_000 ? (usage.status == 0 && took <= .seconds(30)) : nil
                )
            )
            rows.append(Row(section: section, figure: "metrics' peak memory (VmHWM)", value: String(format: "%.0f MiB", Double(peak.value) / 1_048_576)))
        }
        if peaks.count == 2, peaks[0] > 0 {
            let ratio = Double(peaks[1]) / Double(peaks[0])
            rows.append(Row(section: "metrics", figure: "peak memory at \(sizes[1] / 1000)k ÷ at \(sizes[0] / 1000)k", value: String(format: "%.2f×", ratio), target: "≤ 1.2×", met: ratio <= 1.2))
        }
        return rows
    }

    /// The fixture ledger, by SQL, the change feed's triggers off.
    func fill(_ client: PostgresClient, subscriptions: Int) async throws {
        try await client.withConnection { connection in
            try await connection.query("SET session_replication_role = replica", logger: logger)
            try await connection.query(
                """
                INSERT INTO app_store.transaction_rows (bundle_id, environment, transaction_id, original_transaction_id, product_id, product_type,
                    purchase_date, expires_date, signed_date, price, currency, offer_type, offer_discount_type, in_app_ownership_type,
                    transaction_reason, revocation_date, revocation_type, revocation_percentage)
                SELECT 'com.example.scale', 'Production', (s * 100 + p)::text, s::text,
                    CASE WHEN annual THEN 'com.example.scale.annual' ELSE 'com.example.scale.monthly' END, 'Auto-Renewable Subscription',
                    first + p * length, first + (p + 1) * length, first + p * length,
                    CASE WHEN trial AND p = 0 THEN 0 WHEN annual THEN 49990 ELSE 4990 END, 'USD',
                    CASE WHEN trial AND p = 0 THEN 1 END, CASE WHEN trial AND p = 0 THEN 'FREE_TRIAL' END,
                    CASE WHEN s % 20 = 0 THEN 'FAMILY_SHARED' ELSE 'PURCHASED' END,
                    CASE WHEN p = 0 THEN 'PURCHASE' ELSE 'RENEWAL' END,
                    CASE WHEN refunded AND p = periods - 1 THEN first + p * length + interval '10 days' END,
                    CASE WHEN refunded AND p = periods - 1 THEN 'REFUND_PRORATED' END,
                    CASE WHEN refunded AND p = periods - 1 THEN 50000 END
                FROM generate_series(1, \(subscriptions)) AS s,
                    LATERAL (SELECT s % 10 = 0 AS annual, s % 3 = 0 AS trial, s % 25 = 0 AS refunded,
                        now() - interval '400 days' + (s % 380) * interval '1 day' AS first) f,
                    LATERAL (SELECT CASE WHEN f.annual THEN interval '365 days' ELSE interval '30 days' END AS length,
                        CASE WHEN f.annual THEN 1 ELSE 1 + s % 12 END AS periods) l,
                    LATERAL generate_series(0, l.periods - 1) AS p
                """,
                logger: logger
            )
            try await connection.query(
                """
                INSERT INTO app_store.subscriptions (bundle_id, environment, original_transaction_id, product_id, status, expires_date,
                    auto_renew_status, expiration_intent, last_signed_date)
                SELECT bundle_id, environment, original_transaction_id, max(product_id), CASE WHEN max(expires_date) > now() THEN 1 ELSE 2 END,
                    max(expires_date), CASE WHEN max(expires_date) > now() THEN 1 ELSE 0 END,
                    CASE WHEN max(expires_date) > now() THEN NULL WHEN original_transaction_id::bigint % 2 = 0 THEN 1 ELSE 2 END, max(signed_date)
                FROM app_store.transaction_rows GROUP BY bundle_id, environment, original_transaction_id
                """,
                logger: logger
            )
            try await connection.query("SET session_replication_role = DEFAULT", logger: logger)
        }
        try await client.query("ANALYZE", logger: logger)
    }
}
