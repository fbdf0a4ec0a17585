import AppStoreServerAPI
import Decisions
import Foundation
import Ledger
import SignedData

/// What a recovery run found and did, for people (`report.md`) and machines (`report.json`).
/// The JSON's shape is documented in the README and is a contract.
package struct RecoveryReport: Sendable, Codable {
    package struct Run: Sendable, Codable {
        package var id: String
        package var mode: RunMode
        package var environment: String
        /// The app (its bundle ID); absent in reports written before it was added.
        package var bundleId: String?
        /// Absent for a `repair` run, which has no window.
        package var window: Window?
        package var startedAt: String
        package var finishedAt: String
        /// Absent for a `repair` run.
        package var plan: Plan?
        /// "INDEX/COUNT" for one shard of a sharded run (its part of the window in `plan`).
        package var shard: String?
        /// Set when the run took over from an earlier run of the same window that did not finish.
        package var resumed: Resumed?
        /// How long each pass took, in seconds (pass 2 absent when skipped).
        package var passOneSeconds: Double?
        package var passTwoSeconds: Double?
    }

    /// What a run took over from an earlier one that died or was stopped.
    package struct Resumed: Sendable, Codable {
        /// The earlier runs whose checkpoints it started from.
        package var fromRuns: [String]
        /// Notifications they had handled and committed, which this run did not fetch again.
        package var notificationsHandledBefore: Int
        /// Queries of the plan they had finished.
        package var queriesFinishedBefore: Int
        /// Pass 1 was already complete: this run did pass 2 only.
        package var passOneDoneBefore: Bool
    }

    package struct Window: Sendable, Codable {
        package var start: String
        package var end: String
    }

    package struct Plan: Sendable, Codable {
        package var priorityQueries: [String]
        /// `unfiltered`, or `none` for a plan of some types only (the hourly refund-request check).
        package var remainder: String
        package var remainderQueries: Int
        package var onlyFailures: Bool
    }

    /// Pass 2: one repaired (or checked) Apple account.
    package struct Repair: Sendable, Codable {
        /// What pass 2 did to the account; the raw values are report.json's.
        package enum Outcome: String, Sendable, Codable {
            /// Rows were written (in a dry run: would be).
            case repaired
            /// Every row already equals Apple's answer: nothing written.
            case unchanged
            /// Apple could not answer for the account: see `failure`.
            case failed
        }

        /// The originalTransactionId that selected the account.
        package var originalTransactionId: String
        /// The rules that selected the customer (`GapReason` raw values).
        package var reasons: [String]
        /// The first of `reasons`, for readers that want one.
        package var reason: String { reasons.first ?? "" }
        package var transactionsAdded: [String] = []
        package var transactionsChanged: [String] = []
        /// Refunds that only this repair found (money back to the customer: `RevocationKind.isRefund`).
        package var refundsFound: [String] = []
        /// Every revocation only this repair found, each named for what it is (a full or prorated
        /// refund, Family Sharing revoked, or a kind Apple added later).
        package var revocationsFound: [RepairPlanner.RevocationFound] = []
        /// Each changed field of the subscription, before → after.
        package var changes: [RepairPlanner.Change] = []
        package var outcome = Outcome.unchanged
        /// Why the account could not be checked (Apple's error code and message, or retries exhausted).
        package var failure: String?
        /// The account's key (`app_store.accounts.account_id`), and every originalTransactionId
        /// Apple's answers showed in it.
        package var account: String?
        package var members: [String] = []
        package var transactionHistoryRequests = 0
        /// Whether the transaction history started from the account's stored revision.
        package var fromStoredRevision = false
        package var subscriptionStatusesRequests = 0
        package var rejected = 0

        package init(originalTransactionId: String, reasons: [String]) {
            self.originalTransactionId = originalTransactionId
            self.reasons = reasons
        }

        enum CodingKeys: String, CodingKey {
            case originalTransactionId, reasons, reason, transactionsAdded, transactionsChanged, refundsFound, revocationsFound, changes, outcome
            case transactionHistoryRequests, rejected, failure, account, members, fromStoredRevision, subscriptionStatusesRequests
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(originalTransactionId, forKey: .originalTransactionId)
            try container.encode(reasons, forKey: .reasons)
            try container.encode(reason, forKey: .reason)
            try container.encode(transactionsAdded, forKey: .transactionsAdded)
            try container.encode(transactionsChanged, forKey: .transactionsChanged)
            try container.encode(refundsFound, forKey: .refundsFound)
            try container.encode(revocationsFound, forKey: .revocationsFound)
            try container.encode(changes, forKey: .changes)
            try container.encode(outcome, forKey: .outcome)
            try container.encode(transactionHistoryRequests, forKey: .transactionHistoryRequests)
            try container.encode(rejected, forKey: .rejected)
            try container.encodeIfPresent(failure, forKey: .failure)
            try container.encodeIfPresent(account, forKey: .account)
            try container.encode(members, forKey: .members)
            try container.encode(fromStoredRevision, forKey: .fromStoredRevision)
            try container.encode(subscriptionStatusesRequests, forKey: .subscriptionStatusesRequests)
        }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            originalTransactionId = try container.decode(String.self, forKey: .originalTransactionId)
            reasons = try container.decode([String].self, forKey: .reasons)
            transactionsAdded = try container.decode([String].self, forKey: .transactionsAdded)
            transactionsChanged = try container.decode([String].self, forKey: .transactionsChanged)
            refundsFound = try container.decode([String].self, forKey: .refundsFound)
            revocationsFound = try container.decodeIfPresent([RepairPlanner.RevocationFound].self, forKey: .revocationsFound) ?? []
            changes = try container.decode([RepairPlanner.Change].self, forKey: .changes)
            outcome = try container.decode(Outcome.self, forKey: .outcome)
            transactionHistoryRequests = try container.decode(Int.self, forKey: .transactionHistoryRequests)
            rejected = try container.decode(Int.self, forKey: .rejected)
            failure = try container.decodeIfPresent(String.self, forKey: .failure)
            account = try container.decodeIfPresent(String.self, forKey: .account)
            members = try container.decodeIfPresent([String].self, forKey: .members) ?? []
            fromStoredRevision = try container.decodeIfPresent(Bool.self, forKey: .fromStoredRevision) ?? false
            subscriptionStatusesRequests = try container.decodeIfPresent(Int.self, forKey: .subscriptionStatusesRequests) ?? 0
        }
    }

    package struct Counts: Sendable, Codable, Hashable {
        package init() {}
        package var fetched = 0
        package var alreadyRecorded = 0
        package var missed = 0
        package var applied = 0
        package var stale = 0
        package var rejected = 0
        package var retryLater = 0
        package var apiRequests = 0
        /// Pass 2: accounts checked against Apple, those whose rows changed (were written), and
        /// those Apple could not answer for.
        package var customersChecked = 0
        package var customersRepaired = 0
        package var customersFailed = 0
        package var transactionHistoryRequests = 0
        package var subscriptionStatusesRequests = 0
        /// 429s Apple answered during the run (every endpoint, both passes), and by endpoint.
        /// Each was waited out until its `Retry-After` by every request to that endpoint.
        package var rateLimited = 0
        package var rateLimitedByEndpoint: [String: Int] = [:]
    }

    package struct Missed: Sendable, Codable {
        package var notificationUUID: String
        package var notificationType: String
        package var subtype: String?
        /// A refund request Apple waits to have answered by a deadline (its type's policy).
        var awaitsAnswer: Bool { NotificationType(rawValue: notificationType).policy.carriesDeadline }
        package var signedDate: String
        package var originalTransactionId: String?
        package var firstAttemptResult: String?
        /// `applied`, `stale`, `would-apply` or `would-apply-stale`.
        package var action: String
        /// When Apple first tried to send it (absent when history recorded no attempt).
        package var firstAttemptDate: String?
        /// CONSUMPTION_REQUEST only: the last moment to answer it (`ConsumptionDeadline`).
        package var answerBy: String?
    }

    package struct Rejected: Sendable, Codable {
        package var notificationUUID: String?
        /// Read from the unverified payload: whom pass 2 asks Apple about, nothing more.
        package var originalTransactionId: String?
        package var reason: String
        package var detail: String
    }

    package struct CustomerChange: Sendable, Codable {
        package var originalTransactionId: String
        package var before: SubscriptionRecord?
        package var after: SubscriptionRecord
    }

    package struct DeliveryFailures: Sendable, Codable {
        /// Missed notifications by the result of Apple's first delivery attempt.
        package var byFirstAttemptResult: [String: Int]
        /// Missed notifications by the hour (UTC) of the first delivery attempt.
        package var byHourOfFirstAttempt: [String: Int]
    }

    package var run: Run
    package var counts: Counts
    /// The lists grow with the outage: during a run they live in spool files (`ReportList`) and
    /// the report files are written from them a line at a time.
    package var missed: ReportList<Missed>
    package var rejected: ReportList<Rejected>
    package var customers: ReportList<CustomerChange>
    package var deliveryFailures: DeliveryFailures
    /// report.html's chart of the window; nil for a `repair` run, which has no window.
    package var timeline: ReportTimeline? = nil
    /// Pass 2; empty when it did not run.
    package var repairs = ReportList<Repair>([])
    /// Re-delivery to the team's webhook handler (`--deliver-to`); nil when not asked for.
    package var redelivery: RedeliverySummary?
    /// How the run ended (`app_store.runs.outcome`), and what in it needs a person: the run's
    /// result decides both (`RunResult.outcome`, `RunResult.problems`). Not part of the JSON.
    package var outcome = RunOutcome.succeeded
    package var problems = RunResult.Problems()

    /// What pass 1 wrote, or in a dry run would have written (`PassOneResult.overlay`).
    package struct LedgerOverlay: Sendable {
        package var subscriptions: [String: SubscriptionRecord] = [:]
        package var transactions: [String: TransactionRecord] = [:] {
            didSet { transactionsByCustomer = Dictionary(grouping: transactions.values, by: \.originalTransactionId) }
        }
        /// `transactions` by the customer (`originalTransactionId`) each is of, regrouped at each
        /// change of `transactions` (set it whole, not element by element): pass 2 looks up
        /// each account's members here (scanning every transaction per account cost a dry run
        /// over 14,657 notifications a fifth of its CPU).
        package private(set) var transactionsByCustomer: [String: [TransactionRecord]] = [:]
        /// A dry run with a delivery target: the notifications pass 1 would record (notificationUUID, signedDate).
        package var wouldRecord: [(uuid: String, signedDate: Date)] = []
        package init() {}
    }

    enum CodingKeys: String, CodingKey {
        case run, counts, missed, rejected, customers, deliveryFailures, repairs, redelivery, timeline
    }

    package var isDryRun: Bool { run.mode == .dryRun }

    /// Finished, but something needs a person: exit code 3.
    package var hasProblems: Bool { problems.any }

    /// Notifications the run was to re-deliver and did not (`RunResult.undelivered`).
    package var undelivered: Int { problems.undelivered }

    /// Counts as the JSON object `app_store.runs.counts` holds.
    package static func countsJSON(_ counts: Counts) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? String(decoding: encoder.encode(counts), as: UTF8.self)) ?? "{}"
    }

    /// The one line printed at the end of a `repair` run.
    package var repairSummaryLine: String {
        "\(counts.customersChecked) accounts checked, \(counts.customersRepaired) \(isDryRun ? "would change" : "changed")"
            + (counts.customersFailed > 0 ? ", \(counts.customersFailed) failed" : "")
            + ", \(counts.subscriptionStatusesRequests) statuses and \(counts.transactionHistoryRequests) transaction history requests"
            + (counts.rateLimited > 0 ? ", \(counts.rateLimited) rate-limited (429) and retried after Retry-After" : "")
    }

    /// The one line printed at the end of every run.
    package var summaryLine: String {
        let verb = isDryRun ? "would apply" : "applied"
        var line = "fetched \(counts.fetched), already recorded \(counts.alreadyRecorded), missed \(counts.missed), "
            + "\(verb) \(counts.applied), stale \(counts.stale), rejected \(counts.rejected), retry later \(counts.retryLater), "
            + "\(counts.apiRequests) history requests"
        if counts.customersChecked > 0 {
            line += "; repairs: \(counts.customersChecked) accounts checked, \(counts.customersRepaired) \(isDryRun ? "would change" : "changed")"
                + (counts.customersFailed > 0 ? ", \(counts.customersFailed) failed" : "")
                + " (\(counts.subscriptionStatusesRequests) statuses and \(counts.transactionHistoryRequests) transaction history requests)"
        }
        if counts.rateLimited > 0 {
            let endpoints = counts.rateLimitedByEndpoint.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            line += "; Apple rate-limited \(counts.rateLimited) request(s) with 429 (\(endpoints)), each endpoint held back until its Retry-After"
        }
        if let redelivery {
            line += isDryRun
                ? "; would re-deliver \(redelivery.pending) notification(s) to \(redelivery.target)"
                : "; re-delivery to \(redelivery.target): \(redelivery.delivered) delivered, \(redelivery.failed) failed, \(redelivery.pending) pending"
        }
        return line
    }

    package func json() throws -> Data {
        var data = Data()
        try writeJSON { data.append(contentsOf: Array($0.utf8)) }
        return data
    }

    /// `report.json`, written a piece at a time: the lists are read from their spools entry by
    /// entry, so a report of a million notifications never sits in memory whole. Keys sorted,
    /// indented, as `JSONEncoder` with `.prettyPrinted` and `.sortedKeys` writes them.
    package func writeJSON(_ write: (String) throws -> Void) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        // Each line break of the encoder's output gets `indent` after it (in the bytes: a JSON
        // string's own line breaks are escaped, and Foundation's replacingOccurrences cost a dry
        // run 2% of its CPU).
        func encoded(_ value: some Encodable, indent: String) throws -> String {
            let data = try encoder.encode(value)
            let indentBytes = Array(indent.utf8)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(data.count + data.count / 4)
            for byte in data {
                bytes.append(byte)
                if byte == UInt8(ascii: "\n") { bytes.append(contentsOf: indentBytes) }
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        func list<Element>(_ elements: ReportList<Element>) throws {
            var first = true
            for element in elements {
                try write((first ? "[\n    " : ",\n    ") + (try encoded(element, indent: "    ")))
                first = false
            }
            try write(first ? "[]" : "\n  ]")
        }
        // In the order of CodingKeys sorted by name.
        try write("{\n  \"counts\" : " + (try encoded(counts, indent: "  ")) + ",\n  \"customers\" : ")
        try list(customers)
        try write(",\n  \"deliveryFailures\" : " + (try encoded(deliveryFailures, indent: "  ")) + ",\n  \"missed\" : ")
        try list(missed)
        // Only when asked for: report.json stays as it was for runs without --deliver-to.
        if let redelivery { try write(",\n  \"redelivery\" : " + (try encoded(redelivery, indent: "  "))) }
        try write(",\n  \"rejected\" : ")
        try list(rejected)
        try write(",\n  \"repairs\" : ")
        try list(repairs)
        try write(",\n  \"run\" : " + (try encoded(run, indent: "  ")))
        if let timeline { try write(",\n  \"timeline\" : " + (try encoded(timeline, indent: "  "))) }
        try write("\n}\n")
    }

    /// `report.md` as one string (small reports, tests); `writeMarkdown` streams it.
    package func markdown() -> String {
        var lines: [String] = []
        writeMarkdown { lines.append($0) }
        return lines.joined(separator: "\n")
    }

    /// `report.md`: what happened, what was missed, who changed, and why Apple's deliveries failed.
    package func writeMarkdown(_ line: (String) -> Void) {
        let title = isDryRun ? "Dry run: what recovering this window would change" : "Recovery of missed App Store notifications"
        line("# \(title)")
        line("")
        line("| | |")
        line("| --- | --- |")
        if let window = run.window { line("| Window | \(window.start) to \(window.end) |") }
        if let bundleId = run.bundleId { line("| App | \(bundleId) |") }
        line("| Environment | \(run.environment) |")
        line("| Mode | \(isDryRun ? "dry run: nothing was written" : "applied to the ledger") |")
        line("| Run | \(run.id) (\(run.startedAt) to \(run.finishedAt)) |")
        line("")
        line("**\(summaryLine.prefix(1).uppercased() + summaryLine.dropFirst()).**")
        line("")
        if counts.rejected > 0 {
            line("⚠ \(counts.rejected) payload(s) failed verification and were not applied: see Rejected below.")
            line("")
        }
        if let plan = run.plan {
            line("## Plan")
            line("")
            line("Queries to Get Notification History, in order\(plan.onlyFailures ? ", each with onlyFailures" : ""):")
            line("")
            for (index, query) in plan.priorityQueries.enumerated() { line("\(index + 1). \(query)") }
            if plan.remainder == "unfiltered" {
                line("\(plan.priorityQueries.count + 1). Then everything else: one unfiltered pass over the window, skipping the pairs above (it sees every type, including those Apple adds after this release).")
            }
            line("")
        }
        line("## Missed notifications (\(missed.count))")
        line("")
        if missed.isEmpty {
            line("None: the ledger already holds every notification of the window.")
        } else {
            line("| notificationUUID | type / subtype | signedDate | originalTransactionId | first attempt | action |")
            line("| --- | --- | --- | --- | --- | --- |")
            for entry in missed {
                let type = entry.subtype.map { "\(entry.notificationType) / \($0)" } ?? entry.notificationType
                line("| \(entry.notificationUUID) | \(type) | \(entry.signedDate) | \(entry.originalTransactionId ?? "") | \(entry.firstAttemptResult ?? "") | \(entry.action) |")
            }
        }
        line("")
        if let redelivery { writeRedelivery(redelivery, line) }
        // Refund requests Apple asked about while the server was down: someone must answer them.
        var consumptionRequests: [Missed] = []
        for entry in missed where entry.awaitsAnswer { consumptionRequests.append(entry) }
        if !consumptionRequests.isEmpty {
            let deadlines = ConsumptionDeadlines(consumptionRequests, now: reportTime)
            line("## Refund requests awaiting consumption information (\(consumptionRequests.count))")
            line("")
            line(
                "⚠ A customer asked Apple for a refund, and Apple asks for consumption information (Send Consumption Information, "
                    + "`\(ConsumptionDeadline.endpoint)`). Apple's page says: \"Respond within 12 hours of receiving the CONSUMPTION_REQUEST "
                    + "notification\" (\(ConsumptionDeadline.documentation)). The deadline below counts from Apple's first send attempt. "
                    + "`app_store.consumption_requests` holds one request per transaction until Apple decides it: the first of its repeats."
            )
            line("")
            line("**\(deadlines.sentence)**")
            line("")
            line("| notificationUUID | Apple sent | answer by | originalTransactionId | |")
            line("| --- | --- | --- | --- | --- |")
            for entry in consumptionRequests {
                let passed = ConsumptionDeadlines.isPassed(entry, now: reportTime)
                line(
                    "| \(entry.notificationUUID) | \(entry.firstAttemptDate ?? entry.signedDate) | \(entry.answerBy ?? "") | \(entry.originalTransactionId ?? "") | "
                        + (passed ? "deadline passed" : "answerable") + " |"
                )
            }
            line("")
        }
        line("## Customers whose subscription \(isDryRun ? "would change" : "changed") (\(customers.count))")
        line("")
        if customers.isEmpty {
            line("None.")
        } else {
            line("| originalTransactionId | status | expires | auto-renew | signed |")
            line("| --- | --- | --- | --- | --- |")
            for change in customers {
                let before = change.before
                let after = change.after
                line(
                    "| \(change.originalTransactionId) | \(Self.status(before?.status)) → \(Self.status(after.status)) | "
                        + "\(Self.day(before?.expiresDate)) → \(Self.day(after.expiresDate)) | "
                        + "\(Self.autoRenew(before?.autoRenewStatus)) → \(Self.autoRenew(after.autoRenewStatus)) | "
                        + "\(Self.day(before?.lastSignedDate)) → \(Self.day(after.lastSignedDate)) |"
                )
            }
        }
        line("")
        if !rejected.isEmpty {
            line("## Rejected (\(rejected.count)): never applied")
            line("")
            line("| notificationUUID (unverified) | reason | detail |")
            line("| --- | --- | --- |")
            for entry in rejected {
                line("| \(entry.notificationUUID ?? "unreadable") | \(entry.reason) | \(entry.detail.replacingOccurrences(of: "|", with: "/")) |")
            }
            line("")
        }
        if !repairs.isEmpty {
            line(
                "## Repairs from Apple's present state (\(repairs.count) accounts checked, \(counts.customersRepaired) \(isDryRun ? "would change" : "changed")"
                    + (counts.customersFailed > 0 ? ", \(counts.customersFailed) failed" : "") + ")"
            )
            line("")
            if counts.customersFailed > 0 {
                line("⚠ \(counts.customersFailed) account(s) could not be checked; the others were. Run again later, or look at each:")
                line("")
                line("| originalTransactionId | selected because | why it failed |")
                line("| --- | --- | --- |")
                for repair in repairs where repair.outcome == .failed {
                    line("| \(repair.originalTransactionId) | \(repair.reasons.joined(separator: ", ")) | \((repair.failure ?? "").replacingOccurrences(of: "|", with: "/")) |")
                }
                line("")
            }
            line("| account | selected because | transactions added | changed | changes |")
            line("| --- | --- | --- | --- | --- |")
            for repair in repairs where repair.outcome == .repaired {
                let refunds = repair.revocationsFound.isEmpty
                    ? "" : " ⚠ found only here: " + repair.revocationsFound.map { "\($0.transactionId) (\($0.label))" }.joined(separator: ", ")
                let changes = repair.changes.map { change in
                    let whose = change.originalTransactionId.map { "\($0) " } ?? ""
                    return "\(whose)\(change.field): \(change.before ?? "none") → \(change.after ?? "none")"
                }.joined(separator: "; ")
                line(
                    "| \(repair.account ?? repair.originalTransactionId) | \(repair.reasons.joined(separator: ", ")) | \(repair.transactionsAdded.count) | "
                        + "\(repair.transactionsChanged.count)\(refunds) | \(changes) |"
                )
            }
            let unchanged = repairs.reduce(0) { $0 + ($1.outcome == .unchanged ? 1 : 0) }
            if unchanged > 0 { line(""); line("\(unchanged) account(s) checked and already right: nothing written.") }
            line("")
        }
        line("## Why Apple's deliveries failed")
        line("")
        if deliveryFailures.byFirstAttemptResult.isEmpty {
            line("No missed notification carried a failed delivery attempt.")
        } else {
            line("| first attempt result | missed |")
            line("| --- | --- |")
            for (result, count) in deliveryFailures.byFirstAttemptResult.sorted(by: { ($1.value, $0.key) < ($0.value, $1.key) }) {
                line("| \(result) | \(count) |")
            }
            line("")
            line("| hour of first attempt (UTC) | missed |")
            line("| --- | --- |")
            for (hour, count) in deliveryFailures.byHourOfFirstAttempt.sorted(by: { $0.key < $1.key }) {
                line("| \(hour) | \(count) |")
            }
        }
        line("")
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

extension RecoveryReport {
    /// report.md's section on re-delivery to the team's handler.
    func writeRedelivery(_ redelivery: RedeliverySummary, _ line: (String) -> Void) {
        line("## Re-delivery to your webhook handler")
        line("")
        guard !isDryRun else {
            let list = redelivery.wouldDeliver ?? []
            line("Would POST \(list.count) notification(s) to \(redelivery.target), each its original signed body, in signedDate order (the ones this run would record, and any left pending for this handler by earlier runs). Nothing was sent.")
            line("")
            if !list.isEmpty {
                line("| # | notificationUUID |")
                line("| --- | --- |")
                for (index, uuid) in list.enumerated() { line("| \(index + 1) | \(uuid) |") }
                line("")
            }
            return
        }
        line("| | |")
        line("| --- | --- |")
        line("| Handler | \(redelivery.target) |")
        line("| Delivered (answered 2xx) | \(redelivery.delivered) |")
        line("| Failed in this run (still pending) | \(redelivery.failed) |")
        line("| Pending for this handler | \(redelivery.pending) |")
        line("| POSTs sent | \(redelivery.attempts) |")
        line("")
        if redelivery.pending > 0 {
            line("⚠ \(redelivery.pending) notification(s) are not yet delivered: the next run with the same --deliver-to, or `appstore-reconcile deliver --to URL`, sends them; app_store.deliveries holds each one's attempts and last answer.")
            line("")
        }
    }
}
