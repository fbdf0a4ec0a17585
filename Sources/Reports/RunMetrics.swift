import AppStoreServerModel
import Decisions
import Foundation
package import LedgerModel
import RemedyDecisions
import RunResults
import SignedData
#if canImport(Glibc)
import Glibc
#endif

/// A run's figures (`RunMetrics`, in RunResults) in the Prometheus text exposition format
/// (version 0.0.4), for a node exporter's textfile collector or any scraper that reads a file.
/// Every label takes values from a fixed set (outcomes, endpoints, HTTP statuses Apple
/// documents, result names), never from data such as customer IDs, so the series stay few.
extension RunMetrics {
    /// Every outcome, in the order the series are written.
    package static let outcomes: [RunOutcome] = [.succeeded, .succeededWithRejections, .interrupted, .failed, .abandoned, .running]

    /// The exposition text (swift-prometheus's, every family set once).
    package func text() -> String {
        let out = MetricFamilies()
        // Every series: its kind and App Store, and its shard (the files of a sharded run's shards,
        // read by one collector, stay apart too).
        let common = [("kind", kind.rawValue), ("bundle_id", pair.bundleId), ("environment", pair.environment.rawValue)]
            + (shard.map { [("shard", $0)] } ?? [])
        for candidate in Self.outcomes where candidate != .running && candidate != .abandoned {
            out.set("appstore_reconcile_run_outcome", common + [("outcome", candidate.rawValue)], candidate == outcome ? 1 : 0, help: "How this run ended: 1 on its outcome, 0 on the others.")
        }
        out.set("appstore_reconcile_run_dry", common, dryRun ? 1 : 0, help: "1 when this run was a dry run (it wrote nothing).")
        out.set("appstore_reconcile_run_start_timestamp_seconds", common, startedAt.timeIntervalSince1970, help: "When this run started, UNIX seconds.")
        out.set("appstore_reconcile_run_duration_seconds", common, finishedAt.timeIntervalSince(startedAt), help: "How long this run took.")
        if let lastSuccess {
            out.set(
                "appstore_reconcile_last_success_timestamp_seconds", common, lastSuccess.timeIntervalSince1970,
                help: "When the newest successful run of this kind and App Store finished, UNIX seconds. Alert on its age."
            )
        }
        if let runsByOutcome {
            for candidate in Self.outcomes {
                out.set(
                    "appstore_reconcile_runs", common + [("outcome", candidate.rawValue)], Double(runsByOutcome[candidate.rawValue] ?? 0),
                    help: "Runs of this kind and App Store recorded in the ledger, by outcome.")
            }
        }
        if let counts {
            let results: [(String, Int)] = [
                ("fetched", counts.fetched), ("already_recorded", counts.alreadyRecorded), ("missed", counts.missed),
                ("applied", counts.applied), ("stale", counts.stale), ("rejected", counts.rejected), ("retry_later", counts.retryLater),
            ]
            for (result, value) in results {
                out.set("appstore_reconcile_notifications", common + [("result", result)], Double(value), help: "Notifications of this run's pass 1, by result. Alert on rejected.")
            }
            let customers = "Customers of this run's pass 2: checked with Get Transaction History, and repaired (rows changed)."
            out.set("appstore_reconcile_customers", common + [("result", "checked")], Double(counts.customersChecked), help: customers)
            out.set("appstore_reconcile_customers", common + [("result", "repaired")], Double(counts.customersRepaired), help: customers)
        }
        if let redelivery {
            for (result, value) in [("delivered", redelivery.delivered), ("failed", redelivery.failed), ("pending", redelivery.pending)] {
                out.set(
                    "appstore_reconcile_redeliveries", common + [("result", result)], Double(value),
                    help: "Recovered notifications re-delivered to your webhook handler: delivered (2xx) and failed in this run, pending after it (in a dry run: would deliver). Alert on failed."
                )
            }
        }
        if let answers {
            for outcome in ConsumptionAnswerRecord.outcomes + [RefundAnswerReport.wouldSend, RefundAnswerReport.notSupported] {
                out.set(
                    "appstore_reconcile_refund_answers", common + [("outcome", outcome)], Double(answers[outcome] ?? 0),
                    help: "Open refund requests this run answered with Send Consumption Information, by outcome (would_send: a dry run's). Alert on invalid and failed."
                )
            }
        }
        for endpoint in Endpoint.allCases {
            for (status, value) in (api.answers[endpoint] ?? [:]).sorted(by: { $0.key < $1.key }) {
                out.set(
                    "appstore_reconcile_api_requests", common + [("endpoint", endpoint.rawValue), ("status", status)], Double(value),
                    help: "Requests this run sent to Apple, by endpoint and HTTP status (transport_error: no complete answer)."
                )
            }
        }
        for endpoint in Endpoint.allCases {
            out.set("appstore_reconcile_api_rate_limited", common + [("endpoint", endpoint.rawValue)], Double(api.rateLimitedByEndpoint[endpoint] ?? 0), help: "429 answers this run got from Apple, by endpoint.")
            out.set("appstore_reconcile_api_retries", common + [("endpoint", endpoint.rawValue)], Double(api.retriesByEndpoint[endpoint] ?? 0), help: "Requests this run tried again, by endpoint.")
        }
        return out.text
    }

    /// Writes the text to `path` atomically (a temporary file in the same directory, renamed), so
    /// that a scraper never reads half a file.
    package func write(to path: String) throws {
        let url = URL(fileURLWithPath: path)
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(ProcessInfo.processInfo.processIdentifier).tmp")
        try Data(text().utf8).write(to: temporary)
        guard rename(temporary.path, path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: temporary)
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "cannot move the metrics into \(path): \(reason)"])
        }
    }
}
