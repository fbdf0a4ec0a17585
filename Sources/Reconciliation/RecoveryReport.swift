import Foundation
import Ledger

/// What a recovery run found and did, for people (`report.md`) and machines (`report.json`).
/// The JSON's shape is documented in the README and is a contract.
public struct RecoveryReport: Sendable, Codable {
    public struct Run: Sendable, Codable {
        public var id: String
        /// `dry-run` or `apply`.
        public var mode: String
        public var environment: String
        /// Absent for a `repair` run, which has no window.
        public var window: Window?
        public var startedAt: String
        public var finishedAt: String
        /// Absent for a `repair` run.
        public var plan: Plan?
        /// "INDEX/COUNT" for one shard of a sharded run (its part of the window in `plan`).
        public var shard: String?
        /// Set when the run took over from an earlier run of the same window that did not finish.
        public var resumed: Resumed?
        /// How long each pass took, in seconds (pass 2 absent when skipped).
        public var passOneSeconds: Double?
        public var passTwoSeconds: Double?
    }

    /// What a run took over from an earlier one that died or was stopped.
    public struct Resumed: Sendable, Codable {
        /// The earlier runs whose checkpoints it started from.
        public var fromRuns: [String]
        /// Notifications they had handled and committed, which this run did not fetch again.
        public var notificationsHandledBefore: Int
        /// Queries of the plan they had finished.
        public var queriesFinishedBefore: Int
        /// Pass 1 was already complete: this run did pass 2 only.
        public var passOneDoneBefore: Bool
    }

    public struct Window: Sendable, Codable {
        public var start: String
        public var end: String
    }

    public struct Plan: Sendable, Codable {
        public var priorityQueries: [String]
        /// `unfiltered` or `per-type`.
        public var remainder: String
        public var remainderQueries: Int
        public var onlyFailures: Bool
    }

    /// Pass 2: one repaired (or checked) customer.
    public struct Repair: Sendable, Codable {
        public var originalTransactionId: String
        /// The rules that selected the customer (`GapReason` raw values).
        public var reasons: [String]
        /// The first of `reasons`, for readers that want one.
        public var reason: String { reasons.first ?? "" }
        public var transactionsAdded: [String] = []
        public var transactionsChanged: [String] = []
        /// Refunds (revocations) that only this repair found.
        public var refundsFound: [String] = []
        /// Each changed field of the subscription, before → after.
        public var changes: [RepairPlanner.Change] = []
        /// `repaired`, `unchanged`, `not-found` (Apple does not know the transaction ID).
        public var outcome = "unchanged"
        public var transactionHistoryRequests = 0
        public var rejected = 0

        public init(originalTransactionId: String, reasons: [String]) {
            self.originalTransactionId = originalTransactionId
            self.reasons = reasons
        }

        enum CodingKeys: String, CodingKey {
            case originalTransactionId, reasons, reason, transactionsAdded, transactionsChanged, refundsFound, changes, outcome
            case transactionHistoryRequests, rejected
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(originalTransactionId, forKey: .originalTransactionId)
            try container.encode(reasons, forKey: .reasons)
            try container.encode(reason, forKey: .reason)
            try container.encode(transactionsAdded, forKey: .transactionsAdded)
            try container.encode(transactionsChanged, forKey: .transactionsChanged)
            try container.encode(refundsFound, forKey: .refundsFound)
            try container.encode(changes, forKey: .changes)
            try container.encode(outcome, forKey: .outcome)
            try container.encode(transactionHistoryRequests, forKey: .transactionHistoryRequests)
            try container.encode(rejected, forKey: .rejected)
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            originalTransactionId = try container.decode(String.self, forKey: .originalTransactionId)
            reasons = try container.decode([String].self, forKey: .reasons)
            transactionsAdded = try container.decode([String].self, forKey: .transactionsAdded)
            transactionsChanged = try container.decode([String].self, forKey: .transactionsChanged)
            refundsFound = try container.decode([String].self, forKey: .refundsFound)
            changes = try container.decode([RepairPlanner.Change].self, forKey: .changes)
            outcome = try container.decode(String.self, forKey: .outcome)
            transactionHistoryRequests = try container.decode(Int.self, forKey: .transactionHistoryRequests)
            rejected = try container.decode(Int.self, forKey: .rejected)
        }
    }

    public struct Counts: Sendable, Codable, Hashable {
        public var fetched = 0
        public var alreadyRecorded = 0
        public var missed = 0
        public var applied = 0
        public var stale = 0
        public var rejected = 0
        public var retryLater = 0
        public var apiRequests = 0
        /// Pass 2: customers checked with Get Transaction History, and those whose rows changed.
        public var customersChecked = 0
        public var customersRepaired = 0
        public var transactionHistoryRequests = 0
    }

    public struct Missed: Sendable, Codable {
        public var notificationUUID: String
        public var notificationType: String
        public var subtype: String?
        public var signedDate: String
        public var originalTransactionId: String?
        public var firstAttemptResult: String?
        /// `applied`, `stale`, `would-apply` or `would-apply-stale`.
        public var action: String
    }

    public struct Rejected: Sendable, Codable {
        public var notificationUUID: String?
        /// Read from the unverified payload: whom pass 2 asks Apple about, nothing more.
        public var originalTransactionId: String?
        public var reason: String
        public var detail: String
    }

    public struct CustomerChange: Sendable, Codable {
        public var originalTransactionId: String
        public var before: SubscriptionRecord?
        public var after: SubscriptionRecord
    }

    public struct DeliveryFailures: Sendable, Codable {
        /// Missed notifications by the result of Apple's first delivery attempt.
        public var byFirstAttemptResult: [String: Int]
        /// Missed notifications by the hour (UTC) of the first delivery attempt.
        public var byHourOfFirstAttempt: [String: Int]
    }

    public var run: Run
    public var counts: Counts
    public var missed: [Missed]
    public var rejected: [Rejected]
    public var customers: [CustomerChange]
    public var deliveryFailures: DeliveryFailures
    /// Pass 2; empty when it did not run.
    public var repairs: [Repair] = []
    /// What pass 1 wrote, or in a dry run would have written: pass 2 compares Apple's truth with
    /// the ledger as pass 1 left it, so that a dry run reports what the real run would change.
    /// Not part of the JSON.
    public var pass1: LedgerOverlay = LedgerOverlay()

    public struct LedgerOverlay: Sendable {
        public var subscriptions: [String: SubscriptionRecord] = [:]
        public var transactions: [String: TransactionRecord] = [:]
        public init() {}
    }

    enum CodingKeys: String, CodingKey {
        case run, counts, missed, rejected, customers, deliveryFailures, repairs
    }

    /// Adds pass 2's results.
    public mutating func add(repairs: [Repair], seconds: Double? = nil, finishedAt: String? = nil) {
        self.repairs = repairs
        if let seconds { run.passTwoSeconds = (seconds * 1000).rounded() / 1000 }
        if let finishedAt { run.finishedAt = finishedAt }
        counts.customersChecked = repairs.count
        counts.customersRepaired = repairs.filter { $0.outcome == "repaired" }.count
        counts.transactionHistoryRequests = repairs.map(\.transactionHistoryRequests).reduce(0, +)
        counts.rejected += repairs.map(\.rejected).reduce(0, +)
    }

    public var isDryRun: Bool { run.mode == "dry-run" }

    /// How the run ended, as `app_store.runs.outcome` records it.
    public var outcome: String { counts.rejected + counts.retryLater > 0 ? "succeeded_with_rejections" : "succeeded" }

    /// The counts as the JSON object `app_store.runs.counts` holds.
    public var countsJSON: String { Self.countsJSON(counts) }

    /// Counts as the JSON object `app_store.runs.counts` holds.
    public static func countsJSON(_ counts: Counts) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? String(decoding: encoder.encode(counts), as: UTF8.self)) ?? "{}"
    }

    /// The report of a `repair` run: no window, no recovery, only repairs.
    public static func repairOnly(environment: String, dryRun: Bool, startedAt: Date, repairs: [Repair]) -> RecoveryReport {
        var report = RecoveryReport(
            run: Run(
                id: UUID().uuidString.lowercased(), mode: dryRun ? "dry-run" : "apply", environment: environment, window: nil,
                startedAt: startedAt.formatted(.iso8601), finishedAt: Date().formatted(.iso8601), plan: nil
            ),
            counts: Counts(), missed: [], rejected: [], customers: [], deliveryFailures: .init(byFirstAttemptResult: [:], byHourOfFirstAttempt: [:])
        )
        report.add(repairs: repairs)
        return report
    }

    /// The one line printed at the end of every run.
    public var summaryLine: String {
        let verb = isDryRun ? "would apply" : "applied"
        var line = "fetched \(counts.fetched), already recorded \(counts.alreadyRecorded), missed \(counts.missed), "
            + "\(verb) \(counts.applied), stale \(counts.stale), rejected \(counts.rejected), retry later \(counts.retryLater), "
            + "\(counts.apiRequests) history requests"
        if counts.customersChecked > 0 {
            line += "; repairs: \(counts.customersChecked) customers checked, \(counts.customersRepaired) \(isDryRun ? "would change" : "changed")"
        }
        return line
    }

    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(self)
    }

    /// `report.md`: what happened, what was missed, who changed, and why Apple's deliveries failed.
    public func markdown() -> String {
        var lines: [String] = []
        let title = isDryRun ? "Dry run: what recovering this window would change" : "Recovery of missed App Store notifications"
        lines.append("# \(title)")
        lines.append("")
        lines.append("| | |")
        lines.append("| --- | --- |")
        if let window = run.window { lines.append("| Window | \(window.start) to \(window.end) |") }
        lines.append("| Environment | \(run.environment) |")
        lines.append("| Mode | \(isDryRun ? "dry run: nothing was written" : "applied to the ledger") |")
        lines.append("| Run | \(run.id) (\(run.startedAt) to \(run.finishedAt)) |")
        lines.append("")
        lines.append("**\(summaryLine.prefix(1).uppercased() + summaryLine.dropFirst()).**")
        lines.append("")
        if counts.rejected > 0 {
            lines.append("⚠ \(counts.rejected) payload(s) failed verification and were not applied: see Rejected below.")
            lines.append("")
        }
        if let plan = run.plan {
            lines.append("## Plan")
            lines.append("")
            lines.append("Queries to Get Notification History, in order\(plan.onlyFailures ? ", each with onlyFailures" : ""):")
            lines.append("")
            for (index, query) in plan.priorityQueries.enumerated() { lines.append("\(index + 1). \(query)") }
            let remainder = plan.remainder == "unfiltered"
                ? "one unfiltered pass over the window, skipping the pairs above (cheaper than one query per remaining type, and it sees types Apple adds later)"
                : "one query per remaining documented type and subtype (\(plan.remainderQueries) queries; cheaper here than re-reading the priority notifications)"
            lines.append("\(plan.priorityQueries.count + 1). Then everything else: \(remainder).")
            lines.append("")
        }
        lines.append("## Missed notifications (\(missed.count))")
        lines.append("")
        if missed.isEmpty {
            lines.append("None: the ledger already holds every notification of the window.")
        } else {
            lines.append("| notificationUUID | type / subtype | signedDate | originalTransactionId | first attempt | action |")
            lines.append("| --- | --- | --- | --- | --- | --- |")
            for entry in missed {
                let type = entry.subtype.map { "\(entry.notificationType) / \($0)" } ?? entry.notificationType
                lines.append("| \(entry.notificationUUID) | \(type) | \(entry.signedDate) | \(entry.originalTransactionId ?? "") | \(entry.firstAttemptResult ?? "") | \(entry.action) |")
            }
        }
        lines.append("")
        lines.append("## Customers whose subscription \(isDryRun ? "would change" : "changed") (\(customers.count))")
        lines.append("")
        if customers.isEmpty {
            lines.append("None.")
        } else {
            lines.append("| originalTransactionId | status | expires | auto-renew | signed |")
            lines.append("| --- | --- | --- | --- | --- |")
            for change in customers {
                let before = change.before
                let after = change.after
                lines.append(
                    "| \(change.originalTransactionId) | \(Self.status(before?.status)) → \(Self.status(after.status)) | "
                        + "\(Self.day(before?.expiresDate)) → \(Self.day(after.expiresDate)) | "
                        + "\(Self.autoRenew(before?.autoRenewStatus)) → \(Self.autoRenew(after.autoRenewStatus)) | "
                        + "\(Self.day(before?.lastSignedDate)) → \(Self.day(after.lastSignedDate)) |"
                )
            }
        }
        lines.append("")
        if !rejected.isEmpty {
            lines.append("## Rejected (\(rejected.count)): never applied")
            lines.append("")
            lines.append("| notificationUUID (unverified) | reason | detail |")
            lines.append("| --- | --- | --- |")
            for entry in rejected {
                lines.append("| \(entry.notificationUUID ?? "unreadable") | \(entry.reason) | \(entry.detail.replacingOccurrences(of: "|", with: "/")) |")
            }
            lines.append("")
        }
        if !repairs.isEmpty {
            lines.append("## Repairs through Get Transaction History (\(repairs.count) customers checked, \(counts.customersRepaired) \(isDryRun ? "would change" : "changed"))")
            lines.append("")
            lines.append("| originalTransactionId | selected because | transactions added | changed | changes |")
            lines.append("| --- | --- | --- | --- | --- |")
            for repair in repairs where repair.outcome != "unchanged" {
                let refunds = repair.refundsFound.isEmpty ? "" : " ⚠ refund found only here: \(repair.refundsFound.joined(separator: ", "))"
                let changes = repair.changes.map { "\($0.field): \($0.before ?? "none") → \($0.after ?? "none")" }.joined(separator: "; ")
                lines.append(
                    "| \(repair.originalTransactionId) | \(repair.reasons.joined(separator: ", ")) | \(repair.transactionsAdded.count) | "
                        + "\(repair.transactionsChanged.count)\(refunds) | \(repair.outcome == "not-found" ? "transaction ID unknown to Apple" : changes) |"
                )
            }
            let unchanged = repairs.filter { $0.outcome == "unchanged" }.count
            if unchanged > 0 { lines.append(""); lines.append("\(unchanged) customer(s) checked and already right.") }
            lines.append("")
        }
        lines.append("## Why Apple's deliveries failed")
        lines.append("")
        if deliveryFailures.byFirstAttemptResult.isEmpty {
            lines.append("No missed notification carried a failed delivery attempt.")
        } else {
            lines.append("| first attempt result | missed |")
            lines.append("| --- | --- |")
            for (result, count) in deliveryFailures.byFirstAttemptResult.sorted(by: { ($1.value, $0.key) < ($0.value, $1.key) }) {
                lines.append("| \(result) | \(count) |")
            }
            lines.append("")
            lines.append("| hour of first attempt (UTC) | missed |")
            lines.append("| --- | --- |")
            for (hour, count) in deliveryFailures.byHourOfFirstAttempt.sorted(by: { $0.key < $1.key }) {
                lines.append("| \(hour) | \(count) |")
            }
        }
        lines.append("")
        return lines.joined(separator: "\n")
    }

    static func status(_ value: Int?) -> String {
        switch value {
        case nil: "none"
        case 1: "active"
        case 2: "expired"
        case 3: "billing retry"
        case 4: "grace period"
        case 5: "revoked"
        case let other?: "status \(other)"
        }
    }

    static func autoRenew(_ value: Int?) -> String {
        switch value {
        case nil: "?"
        case 0: "off"
        case 1: "on"
        case let other?: String(other)
        }
    }

    static func day(_ date: Date?) -> String {
        guard let date else { return "none" }
        return date.formatted(Date.ISO8601FormatStyle().year().month().day().time(includingFractionalSeconds: false).timeSeparator(.colon))
    }
}
