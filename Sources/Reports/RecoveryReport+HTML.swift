import Decisions
import Foundation
import RunResults
import LedgerModel
import SignedData

/// report.html: the run at a glance for the on-call engineer and the incident review. The verdict
/// and what needs a person first, the window's timeline, then tables a person scans. Lists are
/// read from their spools once each and only their first rows are kept (`HTMLLimits`): the page
/// stays readable and its writing stays flat in memory at 300,000 missed notifications, while
/// report.json keeps every entry.
package struct HTMLLimits: Sendable {
    /// Rows shown per type of missed notification, and per reason of rejection.
    package var rowsPerGroup = 50
    /// Rows shown of each other list (subscription changes, repairs, failed accounts, refund requests).
    package var rowsPerList = 200
    package init() {}
}

extension RecoveryReport {
    /// report.html as one string (tests, small reports); `writeHTML` streams it.
    package func html(limits: HTMLLimits = HTMLLimits()) -> String {
        var text = ""
        writeHTML(limits: limits) { text += $0 }
        return text
    }

    package func writeHTML(limits: HTMLLimits = HTMLLimits(), _ write: (String) -> Void) {
        let summary = HTMLSummary(self, limits: limits)
        let title = compensation != nil
            ? compensationTitle
            : audit != nil && run.window == nil
            ? auditTitle
            : run.window == nil
            ? (isDryRun ? "Dry run: repair from Apple's present state" : "Repair from Apple's present state")
            : (isDryRun ? "Dry run: what recovering this window would change" : "Recovery of missed App Store notifications")
        write(HTMLPage.head(title: "\(title) · \(run.environment)"))
        write("<h1>\(HTMLPage.escape(title))</h1>\n")
        write(verdict(summary))
        write(facts())
        write(needsAPerson(summary, limits: limits))
        if let timeline { write(chart(timeline)) }
        if run.window != nil { write(missedSection(summary, limits: limits)) }
        write(changesSection(limits: limits))
        write(repairsSection(limits: limits))
        if let redelivery { write(redeliverySection(redelivery)) }
        write(answersSection(limits: limits))
        write(importSection(limits: limits))
        write(compensationSection(limits: limits))
        write(auditSection(limits: limits))
        write(planSection())
        write(
            "<p class=\"muted\">Beside this file: report.md (the same run as text) and report.json (every entry of every list, for scripts). "
                + "Times are UTC; hover over one for your local time.</p>\n"
        )
        write(HTMLPage.foot)
    }

    // MARK: The top

    func verdict(_ summary: HTMLSummary) -> String {
        let would = isDryRun
        var parts: [String] = []
        if run.window != nil {
            let missedText = counts.missed == 0
                ? "Nothing was missed: the ledger already held every notification of the window"
                : (would ? "Would recover " : "Recovered ") + "<strong>\(HTMLPage.count(counts.missed, "missed notification"))</strong>"
                    + " (\(HTMLPage.number(counts.applied)) \(would ? "to apply" : "applied"), \(HTMLPage.number(counts.stale)) stale)"
            parts.append(missedText)
            if customers.count > 0 { parts.append("\(would ? "would change" : "changed") \(HTMLPage.count(customers.count, "subscription"))") }
        }
        if counts.customersChecked > 0 {
            parts.append(
                "pass 2 checked \(HTMLPage.count(counts.customersChecked, "account")) and \(would ? "would repair" : "repaired") \(HTMLPage.number(counts.customersRepaired))"
            )
        }
        var needs: [String] = []
        if counts.rejected > 0 { needs.append("\(HTMLPage.count(counts.rejected, "payload")) failed verification") }
        if counts.retryLater > 0 { needs.append("\(HTMLPage.count(counts.retryLater, "payload")) could not be verified yet") }
        if counts.customersFailed > 0 { needs.append("\(HTMLPage.count(counts.customersFailed, "account")) Apple could not answer for") }
        if let answered = answersSentence { parts.append("refund requests: \(HTMLPage.escape(answered))") }
        if let compensated = compensationSentence { parts.append(HTMLPage.escape(compensated)) }
        if let audited = auditSentence { parts.append(HTMLPage.escape(audited)) }
        if problems.answersNotSent > 0 {
            needs.append("<a href=\"#answers\">\(HTMLPage.count(problems.answersNotSent, "refund request"))</a> not answered (invalid facts, Apple's refusal or no reply)")
        }
        // With --answer the requests were answered above; without, someone must answer them.
        if summary.consumptionRequests > 0, answers == nil {
            needs.append(
                "\(HTMLPage.count(summary.consumptionRequests, "refund request")) (CONSUMPTION_REQUEST) to answer: "
                    + HTMLPage.escape(String(summary.consumptionDeadlines.sentence.dropLast()))
            )
        }
        if problems.linesNotImported > 0 {
            needs.append("<a href=\"#import\">\(HTMLPage.count(problems.linesNotImported, "input line"))</a> not imported (garbled, or unknown to Apple)")
        }
        if problems.extensionsNotMade > 0 {
            needs.append("<a href=\"#compensation\">\(HTMLPage.count(problems.extensionsNotMade, "extension"))</a> refused by Apple or not answered")
        }
        if problems.accountsDiffering > 0 {
            needs.append("<a href=\"#audit\">\(HTMLPage.count(problems.accountsDiffering, "account"))</a> differ from Apple and were not repaired")
        }
        if undelivered > 0 { needs.append("\(HTMLPage.count(undelivered, "notification")) not yet delivered to your handler") }
        let first = parts.joined(separator: "; ")
        let sentence = (first.isEmpty ? "Nothing to do" : first.prefix(1).uppercased() + first.dropFirst())
            + ". " + (needs.isEmpty ? "<strong>Nothing needs a person.</strong>" : "<strong>Needs a person:</strong> " + needs.joined(separator: "; ") + ".")
        return "<p class=\"verdict\(needs.isEmpty ? "" : " attention")\" id=\"verdict\">\(sentence)</p>\n"
    }

    func facts() -> String {
        var rows: [(String, String)] = []
        if let window = run.window {
            var text = "\(HTMLPage.time(window.start)) to \(HTMLPage.time(window.end))"
            if let start = ReportTimeline.parse(window.start), let end = ReportTimeline.parse(window.end) {
                text += " <span class=\"muted\">(\(HTMLPage.duration(end.timeIntervalSince(start))))</span>"
            }
            rows.append(("Window", text))
        }
        if let bundleId = run.bundleId { rows.append(("App", HTMLPage.escape(bundleId))) }
        rows.append(("Environment", HTMLPage.escape(run.environment)))
        rows.append(("Mode", isDryRun ? "dry run: nothing was written" : "applied to the ledger"))
        rows.append(("Run ID", "<code>\(HTMLPage.escape(run.id))</code>"))
        var took = "\(HTMLPage.time(run.startedAt, seconds: true)) to \(HTMLPage.time(run.finishedAt, seconds: true))"
        if let start = ReportTimeline.parse(run.startedAt), let end = ReportTimeline.parse(run.finishedAt) {
            took += " <span class=\"muted\">(\(HTMLPage.duration(end.timeIntervalSince(start))))</span>"
        }
        rows.append(("Ran", took))
        var requests: [String] = []
        if run.window != nil { requests.append("\(HTMLPage.number(counts.apiRequests)) Get Notification History") }
        if counts.customersChecked > 0 {
            requests.append("\(HTMLPage.number(counts.subscriptionStatusesRequests)) Get All Subscription Statuses")
            requests.append("\(HTMLPage.number(counts.transactionHistoryRequests)) Get Transaction History")
        }
        if counts.rateLimited > 0 { requests.append("\(HTMLPage.number(counts.rateLimited)) answered 429 and retried after Retry-After") }
        rows.append(("Requests to Apple", requests.isEmpty ? "none" : requests.joined(separator: " · ")))
        if run.window != nil {
            rows.append(
                (
                    "Notifications read",
                    "\(HTMLPage.number(counts.fetched)) fetched · \(HTMLPage.number(counts.alreadyRecorded)) already recorded · \(HTMLPage.number(counts.missed)) missed · \(HTMLPage.number(counts.rejected)) rejected"
                )
            )
        }
        if let shard = run.shard { rows.append(("Shard", HTMLPage.escape(shard))) }
        if let resumed = run.resumed {
            rows.append(
                (
                    "Resumed",
                    "from \(resumed.fromRuns.map { "<code>\(HTMLPage.escape($0))</code>" }.joined(separator: ", ")): "
                        + "\(HTMLPage.count(resumed.notificationsHandledBefore, "notification")) handled before, not counted here"
                )
            )
        }
        return "<dl class=\"facts\">" + rows.map { "<dt>\($0.0)</dt><dd>\($0.1)</dd>" }.joined() + "</dl>\n"
    }

    func needsAPerson(_ summary: HTMLSummary, limits: HTMLLimits) -> String {
        let requestsToAnswer = answers == nil ? summary.consumptionRequests : 0
        guard counts.rejected > 0 || counts.customersFailed > 0 || requestsToAnswer > 0 || counts.retryLater > 0 else { return "" }
        var html = "<h2 id=\"needs-a-person\">Needs a person</h2>\n"
        if requestsToAnswer > 0 {
            html += "<details open id=\"consumption-requests\"><summary><span class=\"badge warn\">refund requests</span> "
                + "\(HTMLPage.count(summary.consumptionRequests, NotificationType.consumptionRequest.rawValue)) arrived while your server missed them: "
                + "\(HTMLPage.escape(summary.consumptionDeadlines.sentence))</summary>"
                + "<p>A customer asked Apple for a refund, and Apple asks for consumption information (Send Consumption Information, "
                + "<code>\(HTMLPage.escape(ConsumptionDeadline.endpoint))</code>). Apple's page says: &ldquo;Respond within 12 hours of receiving the "
                + "CONSUMPTION_REQUEST notification&rdquo; (<code>\(HTMLPage.escape(ConsumptionDeadline.documentation))</code>). "
                + "The deadline counts from Apple's first send attempt. <code>app_store.consumption_requests</code> holds one request per transaction until Apple decides it: the first of its repeats.</p>"
                + "<table><thead><tr><th>notificationUUID</th><th>originalTransactionId</th><th>Apple sent</th><th>answer by</th><th></th></tr></thead><tbody>"
            for entry in summary.consumptionRows {
                let passed = ConsumptionDeadlines.isPassed(entry, now: reportTime)
                html += "<tr><td class=\"id\">\(HTMLPage.escape(entry.notificationUUID))</td><td class=\"id\">\(HTMLPage.escape(entry.originalTransactionId ?? ""))</td>"
                    + "<td>\(HTMLPage.time(entry.firstAttemptDate ?? entry.signedDate))</td><td>\(entry.answerBy.map { HTMLPage.time($0) } ?? "")</td>"
                    + "<td>\(passed ? "deadline passed" : "<strong>answerable</strong>")</td></tr>"
            }
            html += "</tbody></table>" + more(summary.consumptionRequests - summary.consumptionRows.count) + "</details>\n"
        }
        if counts.rejected > 0 {
            html += "<details open id=\"rejected\"><summary><span class=\"badge bad\">rejected</span> \(HTMLPage.count(counts.rejected, "payload")) failed verification: never applied</summary>"
                + "<p>Kept in <code>app_store.rejected_payloads</code> with the reason. Pass 2 asks Apple directly about the customers they name.</p>"
            for group in summary.rejectedGroups {
                html += "<details><summary><code>\(HTMLPage.escape(group.reason))</code>: \(HTMLPage.number(group.count))</summary>"
                    + "<table><thead><tr><th>notificationUUID (unverified)</th><th>originalTransactionId (unverified)</th><th>detail</th></tr></thead><tbody>"
                for entry in group.rows {
                    html += "<tr><td class=\"id\">\(HTMLPage.escape(entry.notificationUUID ?? "unreadable"))</td><td class=\"id\">\(HTMLPage.escape(entry.originalTransactionId ?? ""))</td>"
                        + "<td>\(HTMLPage.escape(entry.detail))</td></tr>"
                }
                html += "</tbody></table>" + more(group.count - group.rows.count) + "</details>"
            }
            // Repairs count their own rejected payloads (Apple's answers that failed verification).
            let listed = summary.rejectedGroups.reduce(0) { $0 + $1.count }
            if counts.rejected > listed {
                html += "<p class=\"muted\">\(HTMLPage.count(counts.rejected - listed, "payload")) in pass 2's answers from Apple; the repairs below name their accounts.</p>"
            }
            html += "</details>\n"
        }
        if counts.retryLater > 0 {
            html += "<p><span class=\"badge warn\">retry later</span> \(HTMLPage.count(counts.retryLater, "payload")) could not be verified during the run "
                + "(a certificate status responder out of reach, say): nothing was applied for them; the next run tries again.</p>\n"
        }
        if counts.customersFailed > 0 {
            html += "<details open id=\"failed-accounts\"><summary><span class=\"badge bad\">failed</span> \(HTMLPage.count(counts.customersFailed, "account")) Apple could not answer for: "
                + "the others were checked; run again later</summary>"
                + "<table><thead><tr><th>originalTransactionId</th><th>selected because</th><th>why it failed</th></tr></thead><tbody>"
            var shown = 0
            for repair in repairs where repair.outcome == .failed {
                guard shown < limits.rowsPerList else { break }
                shown += 1
                html += "<tr><td class=\"id\">\(HTMLPage.escape(repair.originalTransactionId))</td><td>\(HTMLPage.escape(repair.reasons.joined(separator: ", ")))</td>"
                    + "<td>\(HTMLPage.escape(repair.failure ?? ""))</td></tr>"
            }
            html += "</tbody></table>" + more(counts.customersFailed - shown) + "</details>\n"
        }
        return html
    }

    // MARK: The chart

    func chart(_ timeline: ReportTimeline) -> String {
        let shaded = timeline.outages ?? timeline.failureSpans()
        var html = "<h2 id=\"timeline-heading\">The window, one bar group per \(TimelineChart.stepName(timeline.stepSeconds)) (UTC)</h2>\n"
        html += "<p class=\"muted\">\(HTMLPage.count(timeline.failedTotal, "failed first delivery attempt")) among the notifications fetched, "
            + "\(HTMLPage.count(timeline.missedTotal, "missed notification")) placed at Apple's first attempt to send them"
            + (shaded.isEmpty ? "" : "; shaded: when first attempts failed (\(shaded.count == 1 ? "one stretch" : "\(shaded.count) stretches"))")
            + outsideNote(timeline) + ".</p>\n"
        html += TimelineChart.svg(timeline, shaded: shaded) + "\n" + TimelineChart.legend(timeline) + "\n"
        html += TimelineChart.closeUp(timeline)
        return html
    }

    func outsideNote(_ timeline: ReportTimeline) -> String {
        var parts: [String] = []
        if timeline.outsideFailedFirstAttempts > 0 { parts.append(HTMLPage.count(timeline.outsideFailedFirstAttempts, "failed first attempt")) }
        if timeline.outsideMissed > 0 { parts.append(HTMLPage.count(timeline.outsideMissed, "missed notification")) }
        return parts.isEmpty ? "" : "; not drawn, dated outside the window: " + parts.joined(separator: " and ")
    }

    // MARK: The tables

    func missedSection(_ summary: HTMLSummary, limits: HTMLLimits) -> String {
        var html = "<h2 id=\"missed\">Missed notifications (\(HTMLPage.number(counts.missed)))</h2>\n"
        guard counts.missed > 0 else { return html + "<p>None: the ledger already held every notification of the window.</p>\n" }
        html += "<table id=\"missed-by-type\"><thead><tr><th>type</th><th class=\"num\">missed</th><th class=\"num\">\(isDryRun ? "to apply" : "applied")</th><th class=\"num\">stale</th></tr></thead><tbody>"
        for group in summary.missedGroups {
            html += "<tr data-type=\"\(HTMLPage.escape(group.type))\" data-count=\"\(group.count)\"><td><code>\(HTMLPage.escape(group.type))</code></td><td class=\"num\">\(HTMLPage.number(group.count))</td>"
                + "<td class=\"num\">\(HTMLPage.number(group.applied))</td><td class=\"num\">\(HTMLPage.number(group.count - group.applied))</td></tr>"
        }
        html += "</tbody></table>\n<p class=\"muted\">Stale: older than what the ledger already held for the customer, recorded but changing nothing.</p>\n"
        for group in summary.missedGroups {
            html += "<details class=\"missed-group\"><summary><code>\(HTMLPage.escape(group.type))</code>: \(HTMLPage.number(group.count))</summary>"
                + "<table><thead><tr><th>notificationUUID</th><th>subtype</th><th>signedDate</th><th>originalTransactionId</th><th>first attempt</th><th>action</th></tr></thead><tbody>"
            for entry in group.rows {
                html += "<tr><td class=\"id\">\(HTMLPage.escape(entry.notificationUUID))</td><td>\(HTMLPage.escape(entry.subtype ?? ""))</td><td>\(HTMLPage.time(entry.signedDate))</td>"
                    + "<td class=\"id\">\(HTMLPage.escape(entry.originalTransactionId ?? ""))</td><td>\(HTMLPage.escape(entry.firstAttemptResult ?? ""))</td><td>\(HTMLPage.escape(entry.action))</td></tr>"
            }
            html += "</tbody></table>" + more(group.count - group.rows.count) + "</details>\n"
        }
        return html
    }

    func changesSection(limits: HTMLLimits) -> String {
        guard run.window != nil || !customers.isEmpty else { return "" }
        var html = "<h2 id=\"changes\">Subscriptions that \(isDryRun ? "would change" : "changed") (\(HTMLPage.number(customers.count)))</h2>\n"
        guard !customers.isEmpty else { return html + "<p>None.</p>\n" }
        html += "<table id=\"changes-table\"><thead><tr><th>originalTransactionId</th><th>status</th><th>expires</th><th>auto-renew</th><th>last signed</th></tr></thead><tbody>"
        var shown = 0
        for change in customers {
            guard shown < limits.rowsPerList else { break }
            shown += 1
            let before = change.before
            let after = change.after
            html += "<tr><td class=\"id\">\(HTMLPage.escape(change.originalTransactionId))</td>"
                + cell(Self.status(before?.status), Self.status(after.status))
                + cell(Self.minute(before?.expiresDate), Self.minute(after.expiresDate))
                + cell(Self.autoRenew(before?.autoRenewStatus), Self.autoRenew(after.autoRenewStatus))
                + cell(Self.minute(before?.lastSignedDate), Self.minute(after.lastSignedDate)) + "</tr>"
        }
        return html + "</tbody></table>" + more(customers.count - shown) + "\n"
    }

    /// "2026-11-20 14:05:33" (UTC), or "none".
    static func minute(_ date: Date?) -> String {
        guard let date else { return "none" }
        return String(HTMLPage.utc(date, seconds: true).dropLast(4))
    }

    /// "before → after", highlighted when they differ.
    func cell(_ before: String, _ after: String) -> String {
        before == after
            ? "<td>\(HTMLPage.escape(after))</td>"
            : "<td class=\"changed\">\(HTMLPage.escape(before)) → <b>\(HTMLPage.escape(after))</b></td>"
    }

    func repairsSection(limits: HTMLLimits) -> String {
        guard !repairs.isEmpty else { return "" }
        let unchanged = counts.customersChecked - counts.customersRepaired - counts.customersFailed
        var html = "<h2 id=\"repairs\">Pass 2: repairs from Apple's present state</h2>\n"
            + "<p>\(HTMLPage.count(counts.customersChecked, "account")) checked through Get All Subscription Statuses and Get Transaction History: "
            + "\(HTMLPage.number(counts.customersRepaired)) \(isDryRun ? "would change" : "changed"), \(HTMLPage.number(unchanged)) already right"
            + (counts.customersFailed > 0 ? ", \(HTMLPage.number(counts.customersFailed)) failed (above)" : "") + ".</p>\n"
        guard counts.customersRepaired > 0 else { return html }
        html += "<table id=\"repairs-table\"><thead><tr><th>account</th><th>selected because</th><th class=\"num\">transactions added</th><th class=\"num\">changed</th><th>changes</th></tr></thead><tbody>"
        var shown = 0
        for repair in repairs where repair.outcome == .repaired {
            guard shown < limits.rowsPerList else { break }
            shown += 1
            let changes = repair.changes.map { change in
                let whose = change.originalTransactionId.map { "<span class=\"id\">\(HTMLPage.escape($0))</span> " } ?? ""
                return "\(whose)\(HTMLPage.escape(change.field)): \(HTMLPage.escape(change.before ?? "none")) → <b>\(HTMLPage.escape(change.after ?? "none"))</b>"
            }.joined(separator: "<br>")
            let refunds = repair.revocationsFound.map { found in
                " <span class=\"badge \(found.isRefund ? "bad" : "warn")\">\(HTMLPage.escape(found.label)) found only here: \(HTMLPage.escape(found.transactionId))</span>"
            }.joined()
            html += "<tr><td class=\"id\">\(HTMLPage.escape(repair.account ?? repair.originalTransactionId))</td><td>\(HTMLPage.escape(repair.reasons.joined(separator: ", ")))</td>"
                + "<td class=\"num\">\(HTMLPage.number(repair.transactionsAdded.count))</td><td class=\"num\">\(HTMLPage.number(repair.transactionsChanged.count))\(refunds)</td>"
                + "<td>\(changes)</td></tr>"
        }
        return html + "</tbody></table>" + more(counts.customersRepaired - shown) + "\n"
    }

    func redeliverySection(_ redelivery: RedeliverySummary) -> String {
        var html = "<h2 id=\"redelivery\">Re-delivery to your webhook handler</h2>\n"
        if isDryRun {
            return html + "<p>Would POST \(HTMLPage.count(redelivery.wouldDeliver?.count ?? redelivery.pending, "notification")) to <code>\(HTMLPage.escape(redelivery.target))</code>, "
                + "each its original signed body, in signedDate order. Nothing was sent.</p>\n"
        }
        html += "<dl class=\"facts\"><dt>Handler</dt><dd><code>\(HTMLPage.escape(redelivery.target))</code></dd>"
            + "<dt>Delivered (2xx)</dt><dd>\(HTMLPage.number(redelivery.delivered))</dd><dt>Failed in this run</dt><dd>\(HTMLPage.number(redelivery.failed))</dd>"
            + "<dt>Still pending</dt><dd>\(HTMLPage.number(redelivery.pending))</dd><dt>POSTs sent</dt><dd>\(HTMLPage.number(redelivery.attempts))</dd></dl>\n"
        if redelivery.pending > 0 {
            html += "<p><span class=\"badge warn\">pending</span> The next run with the same --deliver-to, or <code>appstore-reconcile deliver --to URL</code>, sends them.</p>\n"
        }
        return html
    }

    func planSection() -> String {
        guard let plan = run.plan else { return "" }
        var html = "<details id=\"plan\"><summary>The plan: \(HTMLPage.count(plan.priorityQueries.count + plan.remainderQueries, "query", "queries")) to Get Notification History"
            + (plan.onlyFailures ? ", each with onlyFailures" : "") + "</summary><ol>"
        for query in plan.priorityQueries { html += "<li><code>\(HTMLPage.escape(query))</code></li>" }
        if plan.remainder == "unfiltered" {
            html += "<li>then everything else: one unfiltered pass over the window, skipping the pairs above (it sees every type, including those Apple adds after this release)</li>"
        }
        return html + "</ol></details>\n"
    }

    func more(_ rest: Int) -> String {
        rest > 0 ? "<p class=\"more\">and \(HTMLPage.number(rest)) more: report.json lists them all.</p>" : ""
    }
}

/// What report.html shows of the report's long lists, read from their spools once each: counts
/// by group and the first rows of each group. Bounded by `HTMLLimits` whatever the lists' length.
struct HTMLSummary {
    struct MissedGroup {
        var type: String
        var count = 0
        var applied = 0
        var rows: [RecoveryReport.Missed] = []
    }

    struct RejectedGroup {
        var reason: String
        var count = 0
        var rows: [RecoveryReport.Rejected] = []
    }

    var missedGroups: [MissedGroup] = []
    var rejectedGroups: [RejectedGroup] = []
    var consumptionRequests = 0
    var consumptionRows: [RecoveryReport.Missed] = []
    var consumptionDeadlines: ConsumptionDeadlines

    init(_ report: RecoveryReport, limits: HTMLLimits) {
        consumptionDeadlines = ConsumptionDeadlines(now: report.reportTime)
        var missed: [String: MissedGroup] = [:]
        for entry in report.missed {
            let type = entry.notificationType.isEmpty ? "unknown" : entry.notificationType
            var group = missed[type] ?? MissedGroup(type: type)
            group.count += 1
            if entry.action == "applied" || entry.action == "would-apply" { group.applied += 1 }
            if group.rows.count < limits.rowsPerGroup { group.rows.append(entry) }
            missed[type] = group
            if entry.awaitsAnswer {
                consumptionRequests += 1
                consumptionDeadlines.count(entry)
                if consumptionRows.count < limits.rowsPerList { consumptionRows.append(entry) }
            }
        }
        missedGroups = missed.values.sorted { ($1.count, $0.type) < ($0.count, $1.type) }
        var rejected: [String: RejectedGroup] = [:]
        for entry in report.rejected {
            var group = rejected[entry.reason] ?? RejectedGroup(reason: entry.reason)
            group.count += 1
            if group.rows.count < limits.rowsPerGroup { group.rows.append(entry) }
            rejected[entry.reason] = group
        }
        rejectedGroups = rejected.values.sorted { ($1.count, $0.reason) < ($0.count, $1.reason) }
    }
}
