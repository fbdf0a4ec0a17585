package import Foundation
import LedgerModel
import Logging
package import PostgresNIO
package import SignedData

// What `audit` reads (issue 64, point 2): one App Store's subscriptions by their sample keys
// (migration 0030), a probe an index lookup, and the newest audit's bound for serve's gauge.
extension LedgerStore {
    /// The lowest and highest sample key of the ledger's subscriptions (two index lookups), the
    /// range the App Store's keys lie in; nil when the App Store has no subscription (a primary-key
    /// lookup).
    package func sampleKeyRange(pair: AppStorePair) async throws -> (lowest: Int64, highest: Int64)? {
        let rows = try await client.query(
            """
            SELECT min(sample_key), max(sample_key) FROM app_store.subscriptions
            WHERE EXISTS (SELECT 1 FROM app_store.subscriptions WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue))
            """,
            logger: logger
        )
        for try await (lowest, highest) in rows.decode((Int64?, Int64?).self) {
            guard let lowest, let highest else { return nil }
            return (lowest, highest)
        }
        return nil
    }

    /// Keys per statement: few enough that the planner looks each up in the index
    /// (`subscriptions_sample_key_idx`) rather than reading the table (the benchmark's EXPLAIN
    /// of a full statement says which it chose).
    package static let sampleKeysPerStatement = 500

    /// The App Store's subscriptions holding these sample keys, a statement per
    /// `sampleKeysPerStatement` of them.
    package func subscriptions(atSampleKeys keys: [Int64], pair: AppStorePair) async throws -> [(key: Int64, originalTransactionId: String)] {
        var found: [(key: Int64, originalTransactionId: String)] = []
        for start in stride(from: 0, to: keys.count, by: Self.sampleKeysPerStatement) {
            let chunk = Array(keys[start..<min(start + Self.sampleKeysPerStatement, keys.count)])
            let rows = try await client.query(Self.sampleProbe(chunk, pair: pair), logger: logger)
            for try await (key, id) in rows.decode((Int64, String).self) { found.append((key, id)) }
        }
        return found
    }

    /// One statement of probes (the benchmark explains it too).
    package static func sampleProbe(_ keys: [Int64], pair: AppStorePair, explain: Bool = false) -> PostgresQuery {
        """
        \(unescaped: explain ? "EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) " : "")SELECT sample_key, original_transaction_id FROM app_store.subscriptions
        WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND sample_key = ANY(\(keys)::bigint[])
        """
    }

    /// Up to `limit` of the App Store's subscriptions after the originalTransactionId `cursor`,
    /// with their sample keys, in the primary key's order (only the App Store's rows are read).
    package func subscriptionsWithSampleKeys(pair: AppStorePair, after cursor: String?, limit: Int) async throws
        -> [(key: Int64, originalTransactionId: String)]
    {
        let rows = try await client.query(
            """
            SELECT sample_key, original_transaction_id FROM app_store.subscriptions
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND original_transaction_id > \(cursor ?? "")
            ORDER BY original_transaction_id LIMIT \(limit)
            """,
            logger: logger
        )
        var found: [(key: Int64, originalTransactionId: String)] = []
        for try await (key, id) in rows.decode((Int64, String).self) { found.append((key, id)) }
        return found
    }

    /// The newest finished audit's bound of each App Store (`app_store.runs` of kind `audit`,
    /// `counts.audit.upperBound95`), and when it finished; absent: never audited, or nothing sampled.
    package func auditBounds(for pairs: [AppStorePair]) async throws -> [AppStorePair: (upperBound: Double, finishedAt: Date)] {
        let ordered = pairs.sorted()
        let rows = try await client.query(
            """
            SELECT p.bundle_id, p.environment, r.finished_at, (r.counts -> 'audit' ->> 'upperBound95')::float8
            FROM unnest(\(ordered.map(\.bundleId))::text[], \(ordered.map(\.environment.rawValue))::text[]) AS p(bundle_id, environment)
            CROSS JOIN unnest(ARRAY['succeeded', 'succeeded_with_rejections']) AS o(outcome)
            CROSS JOIN LATERAL (
                SELECT finished_at, counts FROM app_store.runs
                WHERE bundle_id = p.bundle_id AND environment = p.environment AND kind = \(RunKind.audit.rawValue) AND outcome = o.outcome
                    AND finished_at IS NOT NULL
                ORDER BY finished_at DESC LIMIT 1
            ) r
            """,
            logger: logger
        )
        var newest: [AppStorePair: (upperBound: Double?, finishedAt: Date)] = [:]
        for try await (bundleId, environment, finished, bound) in rows.decode((String, String, Date, Double?).self) {
            let pair = AppStorePair(bundleId: bundleId, environment: AppStoreEnvironment(rawValue: environment))
            if let newer = newest[pair], newer.finishedAt >= finished { continue }
            newest[pair] = (bound, finished)
        }
        return newest.compactMapValues { entry in entry.upperBound.map { ($0, entry.finishedAt) } }
    }

    /// Records an audit that wrote nothing (no `--repair`) as it ends: a finished row of kind
    /// `audit`, never one `running` (such an audit holds no lock, and a run taking it would mark
    /// a running row abandoned).
    package func recordFinishedRun(kind: RunKind, pair: AppStorePair, startedAt: Date, outcome: RunOutcome, countsJSON: String) async throws -> UUID {
        let id = UUID()
        let host = ProcessInfo.processInfo.hostName
        let pid = Int(ProcessInfo.processInfo.processIdentifier)
        try await client.query(
            """
            INSERT INTO app_store.runs (run_id, kind, bundle_id, environment, dry_run, started_at, finished_at, outcome, counts, host, pid)
            VALUES (\(id), \(kind.rawValue), \(pair.bundleId), \(pair.environment.rawValue), false, \(startedAt), now(), \(outcome.rawValue), \(countsJSON)::jsonb, \(host), \(pid))
            """,
            logger: logger
        )
        return id
    }
}
