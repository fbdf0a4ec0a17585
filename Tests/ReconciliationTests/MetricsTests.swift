import AppStoreServerAPI
@testable import Decisions
import Foundation
import LedgerSupport
import Reports
import LiveReceiver
import Ledger
import Reconciliation
import SignedData
import Testing

/// The metrics are swift-prometheus's exposition of what swift-metrics recorded; the names the
/// README documents are the names scrapers and alerts use, so each must still be there.
@Suite struct MetricsTests {
    static func runText() -> String {
        var counts = RecoveryReport.Counts()
        counts.fetched = 12
        counts.rejected = 1
        var api = APIRequestCounts()
        api.answers = [.notificationHistory: ["200": 8, "429": 1]]
        api.rateLimitedByEndpoint = [.notificationHistory: 1]
        var redelivery = RedeliverySummary(target: "https://handler.example")
        redelivery.delivered = 3
        return RunMetrics(
            kind: .run, pair: AppStorePair(bundleId: "com.example.app", environment: .sandbox), outcome: .succeededWithRejections, dryRun: false,
            shard: "0/4", startedAt: Date(timeIntervalSince1970: 1_790_000_000),
            finishedAt: Date(timeIntervalSince1970: 1_790_000_003), counts: counts, api: api, runsByOutcome: ["succeeded": 2],
            lastSuccess: Date(timeIntervalSince1970: 1_789_990_000), redelivery: redelivery, answers: ["sent": 2, "no_facts": 1]
        ).text()
    }

    static func serveText() -> String {
        let pair = AppStorePair(bundleId: "com.example.app", environment: .production)
        let metrics = ServeMetrics(pairs: [pair])
        metrics.record(.rejected(.badSignature), seconds: 0.003)
        metrics.record(other: .health)
        var forwards = DeliveryCounts()
        forwards.pending = 2
        let ledger = LedgerGauges(
            lastSuccess: [LedgerGauges.RunKey(kind: "nightly", pair: pair): Date(timeIntervalSince1970: 1_789_990_000)],
            unansweredConsumptionRequests: [pair: .init(count: 2, nextDeadline: Date(timeIntervalSince1970: 1_790_000_000))],
            auditDriftUpperBound: [pair: 0.001], outboxSlotLagBytes: ["debezium_outbox": 4096]
        )
        return metrics.text(forwards: forwards, ledger: ledger)
    }

    @Test func everyMetricNameTheDocsNameIsExposed() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..")
        let docs = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }.map { "docs/" + $0 }
        var documented: Set<String> = []
        for file in ["README.md"] + docs {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            documented.formUnion(text.matches(of: /appstore_reconcile_[a-z_]+/).map { String($0.output) })
        }
        // The outbox's publication (docs/streams.md) is named like a family and is none.
        documented.remove(OutboxPublication.name)
        #expect(documented.count >= 12, "the docs name the families")
        let exposed = Self.runText() + Self.serveText()
        for name in documented.sorted() {
            // A family: its TYPE line (a histogram's samples are NAME_bucket, NAME_sum, NAME_count).
            #expect(exposed.contains("# TYPE \(name) "), "\(name) is documented and not exposed")
        }
    }

    /// A body that never arrived (the client gone, or too slow) is a request answered like any
    /// other: each kind has its series from the start and counts (it was dropped before).
    @Test func aBodyThatNeverArrivedIsCountedUnderItsOwnOutcome() {
        let metrics = ServeMetrics()
        #expect(metrics.text().contains("appstore_reconcile_serve_requests_total{outcome=\"body_timeout\"} 0\n"))
        metrics.record(other: .bodyCut)
        metrics.record(other: .bodyTimeout)
        metrics.record(other: .bodyTimeout)
        let text = metrics.text()
        #expect(text.contains("appstore_reconcile_serve_requests_total{outcome=\"body_cut\"} 1\n"))
        #expect(text.contains("appstore_reconcile_serve_requests_total{outcome=\"body_timeout\"} 2\n"))
    }

    @Test func everyFamilyIsTypedAndSamplesCarryTheirValues() {
        let run = Self.runText()
        for family in ["run_outcome", "run_dry", "run_start_timestamp_seconds", "run_duration_seconds", "last_success_timestamp_seconds", "runs", "notifications", "customers", "redeliveries", "api_requests", "api_rate_limited", "api_retries"] {
            #expect(run.contains("# TYPE appstore_reconcile_\(family) gauge\n"), "\(family)")
            #expect(run.contains("# HELP appstore_reconcile_\(family) "), "\(family)")
        }
        #expect(run.contains("appstore_reconcile_run_outcome{kind=\"run\",bundle_id=\"com.example.app\",environment=\"Sandbox\",shard=\"0/4\",outcome=\"succeeded_with_rejections\"} 1.0\n"))
        #expect(run.contains("appstore_reconcile_run_outcome{kind=\"run\",bundle_id=\"com.example.app\",environment=\"Sandbox\",shard=\"0/4\",outcome=\"succeeded\"} 0.0\n"))
        #expect(run.contains("appstore_reconcile_notifications{kind=\"run\",bundle_id=\"com.example.app\",environment=\"Sandbox\",shard=\"0/4\",result=\"fetched\"} 12.0\n"))
        #expect(run.contains("appstore_reconcile_api_requests{kind=\"run\",bundle_id=\"com.example.app\",environment=\"Sandbox\",shard=\"0/4\",endpoint=\"notificationHistory\",status=\"429\"} 1.0\n"))
        #expect(run.contains("appstore_reconcile_run_duration_seconds{kind=\"run\",bundle_id=\"com.example.app\",environment=\"Sandbox\",shard=\"0/4\"} 3.0\n"))

        let serve = Self.serveText()
        #expect(serve.contains("# TYPE appstore_reconcile_serve_requests_total counter\n"))
        #expect(serve.contains("appstore_reconcile_serve_requests_total{outcome=\"rejected\"} 1\n"))
        #expect(serve.contains("appstore_reconcile_serve_requests_total{outcome=\"recorded\"} 0\n"), "every series from the start")
        #expect(serve.contains("appstore_reconcile_serve_rejections_total{reason=\"bad_signature\"} 1\n"))
        #expect(serve.contains("# TYPE appstore_reconcile_serve_request_duration_seconds histogram\n"))
        #expect(serve.contains("appstore_reconcile_serve_request_duration_seconds_bucket{le=\"0.005\"} 1\n"))
        #expect(serve.contains("appstore_reconcile_serve_request_duration_seconds_bucket{le=\"+Inf\"} 1\n"))
        #expect(serve.contains("appstore_reconcile_serve_request_duration_seconds_count 1\n"))
        #expect(serve.contains("appstore_reconcile_serve_pending_forwards 2.0\n"))
        #expect(serve.contains("appstore_reconcile_serve_notifications_total{bundle_id=\"com.example.app\",environment=\"Production\",outcome=\"recorded\"} 0\n"), "every configured App Store's series from the start")
        #expect(!serve.contains("appstore_reconcile_serve_notifications_total{bundle_id=\"com.example.app\",environment=\"Production\",outcome=\"rejected\"} 1"), "a bad signature is no App Store's")
    }

    @Test func theForwardGaugesAreLeftOutWhenTheLedgerDidNotAnswerNotShownAtTheirLastValues() {
        let metrics = ServeMetrics()
        #expect(metrics.text(forwards: DeliveryCounts(pending: 4, failed: 1)).contains("appstore_reconcile_serve_failed_forwards 1.0\n"))
        let unanswered = metrics.text(forwards: nil)
        #expect(!unanswered.contains("appstore_reconcile_serve_pending_forwards") && !unanswered.contains("appstore_reconcile_serve_failed_forwards"))
        #expect(unanswered.contains("appstore_reconcile_serve_requests_total{outcome=\"recorded\"} 0\n"))
        #expect(metrics.text(forwards: DeliveryCounts(pending: 0, failed: 0)).contains("appstore_reconcile_serve_pending_forwards 0.0\n"))
    }
}
