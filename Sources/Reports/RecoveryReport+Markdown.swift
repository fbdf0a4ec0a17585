import AppStoreServerModel
import Decisions
import Foundation
import LedgerModel
import RunResults
import SignedData

/// `report.md` and the one-line summaries a run prints.
extension RecoveryReport {
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
            if counts.lossesMendedOutsideWindow > 0 {
                line += "; \(counts.lossesMendedOutsideWindow) account(s) \(isDryRun ? "would be" : "were") mended that Apple owed a notification the webhook did not record (overdue), outside this window"
            }
        }
        if counts.rateLimited > 0 {
            let endpoints = counts.rateLimitedByEndpoint.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            line += "; Apple rate-limited \(counts.rateLimited) request(s) with 429 (\(endpoints)), each endpoint held back until its Retry-After"
        }
        if let answered = answersSentence { line += "; refund requests: \(answered)" }
        if let audited = auditSentence { line += "; audit: \(audited)" }
        if let redelivery {
            line += isDryRun
                ? "; would re-deliver \(redelivery.pending) notification(s) to \(redelivery.target)"
                : "; re-delivery to \(redelivery.target): \(redelivery.delivered) delivered, \(redelivery.failed) failed, \(redelivery.pending) pending"
        }
        return line
    }

    /// `report.md` as one string (small reports, tests); `writeMarkdown` streams it.
    package func markdown() -> String {
        var lines: [String] = []
        writeMarkdown { lines.append($0) }
        return lines.joined(separator: "\n")
    }

    /// `report.md`: what happened, what was missed, who changed, and why Apple's deliveries failed.
    package func writeMarkdown(_ line: (String) -> Void) {
        writeHeader(line)
        writePlan(line)
        writeMissed(line)
        writeRefundRequests(line)
        writeAnswers(line)
        writeImport(line)
        writeCompensation(line)
        writeAudit(line)
        writeCustomers(line)
        writeRepairs(line)
        writeDeliveryFailures(line)
    }

    /// The title, the run's facts and the summary.
    private func writeHeader(_ line: (String) -> Void) {
        let title = compensation != nil
            ? compensationTitle : audit != nil && run.window == nil ? auditTitle : isDryRun ? "Dry run: what recovering this window would change" : "Recovery of missed App Store notifications"
        line("# \(title)")
        line("")
        line("| | |")
        line("| --- | --- |")
        if let window = run.window { line("| Window | \(window.start) to \(window.end) |") }
        if let bundleId = run.bundleId { line("| App | \(bundleId) |") }
        line("| Environment | \(run.environment) |")
        line("| Mode | \(audit != nil && isDryRun ? "audit: compared only, the ledger was not changed" : isDryRun ? "dry run: nothing was written" : "applied to the ledger") |")
        line("| Run | \(run.id) (\(run.startedAt) to \(run.finishedAt)) |")
        line("")
        let headline = audit != nil ? auditSummaryLine : summaryLine
        line("**\(headline.prefix(1).uppercased() + headline.dropFirst()).**")
        line("")
        if counts.rejected > 0 {
            line("⚠ \(counts.rejected) payload(s) failed verification and were not applied: see Rejected below.")
            line("")
        }
    }

    /// The history queries, in order.
    private func writePlan(_ line: (String) -> Void) {
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
    }

    /// What the ledger did not hold, and the re-delivery.
    private func writeMissed(_ line: (String) -> Void) {
        // An audit alone recovers no window.
        guard audit == nil || run.window != nil else { return }
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
    }

    /// Refund requests Apple asked about while the server was down: someone must answer them.
    private func writeRefundRequests(_ line: (String) -> Void) {
        var consumptionRequests: [Missed] = []
        for entry in missed where entry.awaitsAnswer { consumptionRequests.append(entry) }
        if !consumptionRequests.isEmpty {
            let deadlines = ConsumptionDeadlines(consumptionRequests, now: reportTime)
            line("## Refund requests awaiting consumption information (\(consumptionRequests.count))")
            line("")
            line(
                (answers == nil ? "⚠ " : "") + "A customer asked Apple for a refund, and Apple asks for consumption information (Send Consumption Information, "
                    + "`\(ConsumptionDeadline.endpoint)`). Apple's page says: \"Respond within 12 hours of receiving the CONSUMPTION_REQUEST "
                    + "notification\" (\(ConsumptionDeadline.documentation)). The deadline below counts from Apple's first send attempt. "
                    + "`app_store.consumption_requests` holds one request per transaction until Apple decides it: the first of its repeats."
                    + (answers == nil ? "" : " This run answered the open ones: see below.")
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
    }

    /// The subscriptions the run changed (would change), before → after.
    private func writeCustomers(_ line: (String) -> Void) {
        guard audit == nil || run.window != nil else { return }
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
    }

    /// Pass 2: the accounts checked, those that failed and those changed.
    private func writeRepairs(_ line: (String) -> Void) {
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
            if !counts.repairReasons.isEmpty {
                line("| selected because | accounts | \(isDryRun ? "would change" : "changed") |")
                line("| --- | ---: | ---: |")
                for (reason, count) in counts.repairReasons.sorted(by: { $0.key < $1.key }) {
                    line("| \(reason) | \(count.selected) | \(count.changed) |")
                }
                line("")
                if counts.lossesMendedOutsideWindow > 0 {
                    line(
                        "\(counts.lossesMendedOutsideWindow) account(s) \(isDryRun ? "would be" : "were") mended that Apple owed a notification "
                            + "(`overdue`) and that nothing recovered in the window explains: notifications lost outside any outage "
                            + "(see docs/operations.md#notifications-overdue)."
                    )
                    line("")
                }
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
    }

    /// Why Apple's deliveries failed: by first attempt result and by hour.
    private func writeDeliveryFailures(_ line: (String) -> Void) {
        guard audit == nil || run.window != nil else { return }
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
