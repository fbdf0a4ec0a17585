import Ledger
import Foundation
import SignedData
import Synchronization

/// `serve`'s figures since it started, in the Prometheus text format for `GET /metrics`:
/// requests by outcome, rejections by reason, and a histogram of how long notification POSTs
/// took to answer. Labels take values from fixed sets only.
package final class ServeMetrics: Sendable {
    /// Histogram bounds, seconds.
    static let bounds: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15]

    struct State {
        var requests: [String: Int] = [:]
        var rejections: [String: Int] = [:]
        var buckets = Array(repeating: 0, count: ServeMetrics.bounds.count)
        var count = 0
        var sum = 0.0
    }

    private let state = Mutex(State())

    package init() {}

    /// A notification POST and how long its answer took.
    package func record(_ answer: NotificationReceiver.Answer, seconds: Double) {
        state.withLock { state in
            state.requests[answer.outcome, default: 0] += 1
            if case .rejected(let reason) = answer { state.rejections[reason.rawValue, default: 0] += 1 }
            for (index, bound) in Self.bounds.enumerated() where seconds <= bound { state.buckets[index] += 1 }
            state.count += 1
            state.sum += seconds
        }
    }

    /// Any other request (`not_found`, `method_not_allowed`, `health`, `metrics`).
    package func record(other outcome: String) {
        state.withLock { $0.requests[outcome, default: 0] += 1 }
    }

    /// The exposition text; `forwards` when `--forward-to` is set and the ledger answered.
    package func text(forwards: DeliveryCounts? = nil) -> String {
        let state = self.state.withLock { $0 }
        var out = Exposition()
        out.family("appstore_reconcile_serve_requests_total", .counter, "Requests answered, by outcome (recorded, already_recorded, rejected, bad_body, retry_later, unavailable, overloaded, not_found, method_not_allowed, health, metrics).")
        for outcome in ["recorded", "already_recorded", "rejected", "bad_body", "retry_later", "unavailable", "overloaded", "not_found", "method_not_allowed", "health", "metrics"] {
            out.sample("appstore_reconcile_serve_requests_total", [("outcome", outcome)], Double(state.requests[outcome] ?? 0))
        }
        out.family("appstore_reconcile_serve_rejections_total", .counter, "Notifications that failed verification (answered 400, kept in app_store.rejected_payloads), by reason.")
        for reason in RejectionReason.allCases {
            out.sample("appstore_reconcile_serve_rejections_total", [("reason", reason.rawValue)], Double(state.rejections[reason.rawValue] ?? 0))
        }
        out.family("appstore_reconcile_serve_request_duration_seconds", .histogram, "How long a notification POST took to answer, from its body read to its answer (committed when 200).")
        for (index, bound) in Self.bounds.enumerated() {
            out.sample("appstore_reconcile_serve_request_duration_seconds_bucket", [("le", String(bound))], Double(state.buckets[index]), family: "appstore_reconcile_serve_request_duration_seconds")
        }
        out.sample("appstore_reconcile_serve_request_duration_seconds_bucket", [("le", "+Inf")], Double(state.count), family: "appstore_reconcile_serve_request_duration_seconds")
        out.sample("appstore_reconcile_serve_request_duration_seconds_sum", [], state.sum, family: "appstore_reconcile_serve_request_duration_seconds")
        out.sample("appstore_reconcile_serve_request_duration_seconds_count", [], Double(state.count), family: "appstore_reconcile_serve_request_duration_seconds")
        if let forwards {
            out.family("appstore_reconcile_serve_pending_forwards", .gauge, "Recorded notifications not yet accepted by the --forward-to handler, still being sent.")
            out.sample("appstore_reconcile_serve_pending_forwards", [], Double(forwards.pending))
            out.family("appstore_reconcile_serve_failed_forwards", .gauge, "Notifications the --forward-to handler refused --forward-max-attempts times: parked, sent again by deliver --retry-failed.")
            out.sample("appstore_reconcile_serve_failed_forwards", [], Double(forwards.failed))
        }
        return out.text
    }
}
