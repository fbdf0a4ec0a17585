import CoreMetrics
package import Decisions
import Foundation
import Reports
import Reconciliation
package import Ledger
package import SignedData

/// `serve`'s figures since it started, for `GET /metrics`: requests by outcome, rejections by
/// reason, and a histogram of how long notification POSTs took to answer; recorded through
/// swift-metrics' API, exposed by swift-prometheus. Labels take values from fixed sets only, and
/// every series exists from the start (a scraper sees zeros, not gaps). Notifications are also
/// counted by the configured App Store they are proven to be of (`bundle_id`, `environment`):
/// recorded, already recorded, or rejected for a nested payload after its own signature held for
/// that App Store. The configured App Stores only, so an attacker naming other apps adds no
/// series, and neither a forgery naming one nor Apple's notification of another app, appAppleId
/// or environment (anyone holding one can send it) counts under one: those count by reason only.
package final class ServeMetrics: Sendable {
    /// Histogram bounds, seconds.
    static let bounds: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15]

    /// Every outcome a request is counted under.
    /// A request that is not a notification answered (or one whose body never arrived).
    package enum Other: String, CaseIterable, Sendable {
        /// The connection ended before the body did (answered 400 to nobody).
        case bodyCut = "body_cut"
        /// The body did not arrive in time (answered 408).
        case bodyTimeout = "body_timeout"
        /// A body sent where none is accepted (any route but the notification POST): answered 413
        /// at once, the connection closed unread.
        case bodyRefused = "body_refused"
        /// A request with an `Upgrade` field (any route): answered 400 by its connection, which
        /// reads nothing more and closes (`ProtocolSwitch`).
        case upgradeRefused = "upgrade_refused"
        /// A `CONNECT` request: answered 405 likewise.
        case connectRefused = "connect_refused"
        case notFound = "not_found"
        case methodNotAllowed = "method_not_allowed"
        case health, metrics
    }

    /// Every outcome a request is counted under: a notification's answer, then the others.
    static let outcomes = ["recorded", "already_recorded", "rejected", "bad_body", "retry_later", "unavailable", "overloaded"]
        + Other.allCases.map(\.rawValue)

    private let families = MetricFamilies()
    private let requests: [String: CoreMetrics.Counter]
    private let rejections: [RejectionReason: CoreMetrics.Counter]
    private let duration: CoreMetrics.Timer
    private let connectionsClosed: [ConnectionClosure: CoreMetrics.Counter]
    private let rejectionsNotKept: [RejectionReason: CoreMetrics.Counter]
    /// By App Store, then outcome.
    private let notifications: [AppStorePair: [String: CoreMetrics.Counter]]

    /// The outcomes a notification of a configured App Store is counted under.
    static let notificationOutcomes = ["recorded", "already_recorded", "rejected"]

    /// The metrics of a `serve` receiving `pairs` (none: no per-App-Store family).
    package init(pairs: [AppStorePair] = []) {
        let families = self.families
        notifications = Dictionary(
            uniqueKeysWithValues: Set(pairs).sorted().map { pair in
                (
                    pair,
                    Dictionary(
                        uniqueKeysWithValues: Self.notificationOutcomes.map { outcome in
                            (
                                outcome,
                                families.counter(
                                    "appstore_reconcile_serve_notifications_total",
                                    [("bundle_id", pair.bundleId), ("environment", pair.environment.rawValue), ("outcome", outcome)],
                                    help: "Notifications answered, by the configured App Store they are proven to be of (signature checked) and outcome (\(Self.notificationOutcomes.joined(separator: ", ")))."
                                )
                            )
                        }
                    )
                )
            }
        )
        requests = Dictionary(
            uniqueKeysWithValues: Self.outcomes.map { outcome in
                (
                    outcome,
                    families.counter(
                        "appstore_reconcile_serve_requests_total", [("outcome", outcome)],
                        help: "Requests answered, by outcome (\(Self.outcomes.joined(separator: ", ")))."
                    )
                )
            }
        )
        rejections = Dictionary(
            uniqueKeysWithValues: RejectionReason.allCases.map { reason in
                (
                    reason,
                    families.counter(
                        "appstore_reconcile_serve_rejections_total", [("reason", reason.rawValue)],
                        help: "Notifications that failed verification (answered 400, kept in app_store.rejected_payloads), by reason."
                    )
                )
            }
        )
        rejectionsNotKept = Dictionary(
            uniqueKeysWithValues: RejectionReason.allCases.map { reason in
                (
                    reason,
                    families.counter(
                        "appstore_reconcile_serve_rejections_not_kept_total", [("reason", reason.rawValue)],
                        help: "Notifications that failed verification and were not written to app_store.rejected_payloads (past --rejections-kept-per-hour for their reason), by reason; counted in appstore_reconcile_serve_rejections_total too."
                    )
                )
            }
        )
        connectionsClosed = Dictionary(
            uniqueKeysWithValues: ConnectionClosure.allCases.map { closure in
                (
                    closure,
                    families.counter(
                        "appstore_reconcile_serve_connections_closed_total", [("reason", closure.rawValue)],
                        help: "Connections serve closed at one of their bounds: pipelined (more requests read unanswered than --max-pipelined-requests), request_timeout (a request not whole within --request-timeout), write_timeout (an answer unread for --write-timeout)."
                    )
                )
            }
        )
        duration = families.timer(
            "appstore_reconcile_serve_request_duration_seconds", buckets: Self.bounds.map { .nanoseconds(Int64(($0 * 1e9).rounded())) },
            help: "How long a notification POST took to answer, from its body read to its answer (committed when 200)."
        )
    }

    /// A notification POST, the configured App Store it is of (when known), and how long its answer took.
    package func record(_ answer: NotificationReceiver.Answer, of pair: AppStorePair? = nil, notKept: Bool = false, seconds: Double) {
        requests[answer.outcome]?.increment()
        if let pair { notifications[pair]?[answer.outcome]?.increment() }
        if case .rejected(let reason) = answer {
            rejections[reason]?.increment()
            if notKept { rejectionsNotKept[reason]?.increment() }
        }
        duration.recordNanoseconds(Int64((seconds * 1e9).rounded()))
    }

    /// Any other request.
    package func record(other outcome: Other) {
        requests[outcome.rawValue]?.increment()
    }

    /// A request refused from its head for asking to leave HTTP/1.1 (`ProtocolSwitch`).
    package func record(refused switching: ProtocolSwitch) {
        record(other: switching == .connect ? .connectRefused : .upgradeRefused)
    }

    /// A connection closed at one of its bounds (`ConnectionBounds`).
    package func record(closed closure: ConnectionClosure) {
        connectionsClosed[closure]?.increment()
    }

    /// The exposition text; `forwards` when `--forward-to` is set and the ledger answered.
    /// Without `forwards` the two forward gauges are left out, not shown at their last values
    /// (an `absent()` alert must see the ledger not answering); so are the ledger's gauges
    /// without `ledger`.
    package func text(forwards: DeliveryCounts? = nil, ledger: LedgerGauges? = nil) -> String {
        serveText(forwards: forwards) + (ledger.map(ledgerText) ?? "")
    }

    /// The configured App Stores, in order.
    package var pairs: [AppStorePair] { notifications.keys.sorted() }

    /// The ledger's figures at this scrape, in a registry of their own made for it: a value the
    /// ledger no longer has (a request answered) is gone, not kept at its last value.
    private func ledgerText(_ ledger: LedgerGauges) -> String {
        let out = MetricFamilies()
        for (key, date) in ledger.lastSuccess.sorted(by: { ($0.key.kind, $0.key.pair) < ($1.key.kind, $1.key.pair) }) {
            out.set(
                "appstore_reconcile_last_success_timestamp_seconds",
                [("kind", key.kind), ("bundle_id", key.pair.bundleId), ("environment", key.pair.environment.rawValue)], date.timeIntervalSince1970,
                help: "When the newest successful run of this kind and App Store finished, UNIX seconds, as the ledger says. Alert on its age."
            )
        }
        for pair in pairs {
            let labels = [("bundle_id", pair.bundleId), ("environment", pair.environment.rawValue)]
            let unanswered = ledger.unansweredConsumptionRequests[pair]
            out.set(
                "appstore_reconcile_consumption_requests_unanswered", labels, Double(unanswered?.count ?? 0),
                help: "Refund requests (CONSUMPTION_REQUEST) recorded and not yet answered (answered_date unset) whose 12-hour deadline is still ahead."
            )
            if let unanswered {
                out.set(
                    "appstore_reconcile_consumption_request_next_deadline_timestamp_seconds", labels, unanswered.nextDeadline.timeIntervalSince1970,
                    help: "The soonest deadline of the refund requests not yet answered, UNIX seconds. Alert when it is near."
                )
            }
            out.set(
                "appstore_reconcile_overdue_subscriptions", labels, Double(ledger.overdueSubscriptions[pair] ?? 0),
                help: "Subscriptions Apple owes a notification (a renewal, a failure, an expiry) due more than overdueAfter ago, with nothing recorded since: the webhook may be losing notifications."
            )
            if let bound = ledger.auditDriftUpperBound[pair] {
                out.set(
                    "appstore_reconcile_audit_drift_upper_bound", labels, bound,
                    help: "The newest audit's upper bound, at 95% confidence (exact binomial), of the share of accounts whose ledger rows differ from Apple's answer (0 to 1). Absent until an audit ran."
                )
            }
        }
        for (slot, lag) in ledger.outboxSlotLagBytes.sorted(by: { $0.key < $1.key }) {
            out.set(
                "appstore_reconcile_outbox_slot_lag_bytes", [("slot", slot)], Double(lag),
                help: "Bytes of WAL each logical replication slot of the ledger's database (the outbox's Debezium or Sequin) holds back: how far behind its reader is. Alert when it grows."
            )
        }
        return out.text
    }

    private func serveText(forwards: DeliveryCounts?) -> String {
        let pending = families.gauge(
            "appstore_reconcile_serve_pending_forwards", [], help: "Recorded notifications not yet accepted by the --forward-to handler, still being sent."
        )
        let failed = families.gauge(
            "appstore_reconcile_serve_failed_forwards", [],
            help: "Notifications the --forward-to handler refused --forward-max-attempts times: parked, sent again by deliver --retry-failed."
        )
        guard let forwards else {
            pending.destroy()
            failed.destroy()
            return families.text
        }
        pending.set(Double(forwards.pending))
        failed.set(Double(forwards.failed))
        return families.text
    }
}
