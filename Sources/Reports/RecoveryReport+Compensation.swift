import Decisions
import Foundation
import RemedyDecisions
import RunResults

/// `compensate` in the reports: report.md's and report.html's section and the line the command
/// prints (report.json's `compensation` is `CompensationResult` as it is).
extension RecoveryReport {
    /// The title of a `compensate` report.
    var compensationTitle: String {
        isDryRun ? "Dry run: renewal-date extensions for the subscribers the outage locked out" : "Renewal-date extensions for the subscribers the outage locked out"
    }

    /// The verdict's sentence: how many were (or would be) extended, refused, skipped.
    var compensationSentence: String? {
        guard let compensation else { return nil }
        var parts: [String] = []
        if compensation.windowStart != nil, compensation.massExtensions.isEmpty {
            let counts = compensation.byOutcome
            parts.append("\(compensation.extensions.count) subscriptions denied access and active now")
            for (outcome, words) in [("would_extend", "would be extended"), ("extended", "extended"), ("refused", "refused by Apple"), ("skipped", "skipped"), ("pending", "pending")]
            where counts[outcome, default: 0] > 0 {
                parts.append("\(counts[outcome]!) \(words)")
            }
        }
        for mass in compensation.massExtensions {
            parts.append("\(mass.productId): mass extension \(mass.outcome)" + (mass.succeededCount.map { " (\($0) extended, \(mass.failedCount ?? 0) failed)" } ?? ""))
        }
        return parts.joined(separator: ", ")
    }

    /// The one line printed at the end of a `compensate`.
    package var compensationSummaryLine: String {
        guard let compensation else { return repairSummaryLine }
        var parts: [String] = []
        if compensation.windowStart != nil {
            let counts = compensation.byOutcome
            parts.append("\(compensation.extensions.count) hurt subscriptions (from \(compensation.missedGrants) missed notifications that grant access)")
            if compensation.recordedBeforeAccessEnded > 0 {
                parts.append("\(compensation.recordedBeforeAccessEnded) recorded before the access they continue ended (denied nothing)")
            }
            for outcome in ["would_extend", "extended", "refused", "skipped", "pending"] where counts[outcome, default: 0] > 0 {
                parts.append("\(counts[outcome]!) \(outcome.replacingOccurrences(of: "_", with: " "))")
            }
            let earlier = compensation.extensions.count(where: \.earlier)
            if earlier > 0 { parts.append("\(earlier) settled by an earlier compensate of this window") }
        }
        for mass in compensation.massExtensions {
            parts.append(
                "\(mass.productId): mass extension \(mass.outcome)"
                    + (mass.succeededCount.map { ", \($0) extended, \(mass.failedCount ?? 0) failed" } ?? "")
            )
        }
        parts.append("\(compensation.requestsToApple) requests to Apple")
        return parts.joined(separator: "; ")
    }

    /// report.md's section.
    func writeCompensation(_ line: (String) -> Void) {
        guard let compensation else { return }
        line("## Compensation")
        line("")
        if let start = compensation.windowStart, let end = compensation.windowEnd {
            line(
                "Window \(start) to \(end): \(compensation.missedGrants) notifications that grant access were missed by the live server and recovered "
                    + "(\(compensation.recordedBeforeAccessEnded) of them before the access they continue ended: a renewal Apple charged early denies nothing until the old period runs out); "
                    + "\(compensation.extensions.count) subscriptions were denied access at least \(compensation.minimumHours ?? 0) hours and are active now. "
                    + (compensation.days.map { "Each gets \($0) days (--days)." } ?? "Each gets ceil(hours denied / 24) days.")
                    + (isDryRun ? " Dry run: nothing was sent or written." : "")
            )
            line("")
            if !compensation.extensions.isEmpty {
                line("| originalTransactionId | product | missed | signed | hours denied | days | outcome | new expiry | detail |")
                line("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
                for entry in compensation.extensions {
                    let cells = [
                        entry.originalTransactionId, entry.productId ?? "", entry.missedNotificationType, entry.missedSignedDate, String(entry.hoursDenied),
                        String(entry.extendByDays), entry.outcome, entry.effectiveDate ?? "", entry.detail ?? "",
                    ]
                    line("| " + cells.map { $0.replacingOccurrences(of: "|", with: "\\|") }.joined(separator: " | ") + " |")
                }
                line("")
            }
        }
        if !compensation.massExtensions.isEmpty {
            line("| product | requestIdentifier | days | outcome | complete | succeeded | failed | detail |")
            line("| --- | --- | --- | --- | --- | --- | --- | --- |")
            for mass in compensation.massExtensions {
                let cells = [
                    mass.productId, mass.requestIdentifier, String(mass.extendByDays), mass.outcome, mass.completeDate ?? "",
                    mass.succeededCount.map(String.init) ?? "", mass.failedCount.map(String.init) ?? "", mass.detail ?? "",
                ]
                line("| " + cells.map { $0.replacingOccurrences(of: "|", with: "\\|") }.joined(separator: " | ") + " |")
            }
            line("")
        }
    }

    /// report.html's section.
    func compensationSection(limits: HTMLLimits) -> String {
        guard let compensation else { return "" }
        var html = "<h2 id=\"compensation\">Compensation</h2>\n"
        if let start = compensation.windowStart, let end = compensation.windowEnd {
            html += "<p>Window \(HTMLPage.escape(start)) to \(HTMLPage.escape(end)): \(HTMLPage.count(compensation.missedGrants, "missed notification")) that grant access "
                + "(\(compensation.recordedBeforeAccessEnded) recorded before the access they continue ended: denied nothing); "
                + "\(HTMLPage.count(compensation.extensions.count, "subscription")) denied access at least \(compensation.minimumHours ?? 0) hours and active now."
                + (isDryRun ? " <strong>Dry run: nothing was sent or written.</strong>" : "") + "</p>\n"
            if !compensation.extensions.isEmpty {
                html += "<table><thead><tr><th>originalTransactionId</th><th>product</th><th>missed</th><th>hours denied</th><th>days</th><th>outcome</th>"
                    + "<th>new expiry</th><th>detail</th></tr></thead><tbody>"
                for entry in compensation.extensions.prefix(limits.rowsPerList) {
                    html += "<tr><td><code>\(HTMLPage.escape(entry.originalTransactionId))</code></td><td>\(HTMLPage.escape(entry.productId ?? ""))</td>"
                        + "<td>\(HTMLPage.escape(entry.missedNotificationType)) \(HTMLPage.escape(entry.missedSignedDate))</td><td>\(entry.hoursDenied)</td>"
                        + "<td>\(entry.extendByDays)</td><td>\(HTMLPage.escape(entry.outcome))</td><td>\(HTMLPage.escape(entry.effectiveDate ?? ""))</td>"
                        + "<td>\(HTMLPage.escape(entry.detail ?? ""))</td></tr>"
                }
                html += "</tbody></table>\n"
                if compensation.extensions.count > limits.rowsPerList {
                    html += "<p class=\"muted\">The first \(limits.rowsPerList) of \(HTMLPage.number(compensation.extensions.count)); report.json and report.md list every one.</p>\n"
                }
            }
        }
        if !compensation.massExtensions.isEmpty {
            html += "<table><thead><tr><th>product</th><th>days</th><th>outcome</th><th>complete</th><th>succeeded</th><th>failed</th><th>detail</th></tr></thead><tbody>"
            for mass in compensation.massExtensions {
                html += "<tr><td>\(HTMLPage.escape(mass.productId))</td><td>\(mass.extendByDays)</td><td>\(HTMLPage.escape(mass.outcome))</td>"
                    + "<td>\(HTMLPage.escape(mass.completeDate ?? ""))</td><td>\(mass.succeededCount.map(String.init) ?? "")</td>"
                    + "<td>\(mass.failedCount.map(String.init) ?? "")</td><td>\(HTMLPage.escape(mass.detail ?? ""))</td></tr>"
            }
            html += "</tbody></table>\n"
        }
        return html
    }
}
