import Decisions
import Foundation
import RunResults

/// `audit` in the reports: report.md's and report.html's section and the line the command prints
/// (report.json's `audit` is `LedgerAuditReport` as it is).
extension RecoveryReport {
    /// The title of an `audit` report.
    var auditTitle: String { audit?.repaired == true ? "Audit of the ledger against Apple, with repair" : "Audit of the ledger against Apple" }

    /// The bound as a person reads it: "under 0.10%".
    static func percent(_ share: Double?) -> String {
        guard let share else { return "no bound (nothing compared)" }
        return String(format: "%.2f%%", share * 100)
    }

    /// The audit's sentence: what was compared, what differed, the bound.
    var auditSentence: String? {
        guard let audit else { return nil }
        var sentence = "\(audit.sampled) account(s) compared with Apple\(audit.wholeLedger ? " (every subscription of the ledger)" : ", drawn at random")"
            + ", \(audit.differing) differing"
            + (audit.differing > 0 ? (audit.repaired ? " and repaired" : " (not repaired: run with --repair to mend them)") : "")
            + "; at 95% confidence at most \(Self.percent(audit.upperBound95)) of the accounts differ from Apple"
        if !audit.unknownToApple.isEmpty { sentence += "; \(audit.unknownToApple.count) unknown to Apple (reported apart)" }
        if audit.cutShort { sentence += "; cut short: \(audit.notCompared) not compared, the bound is over what was" }
        return sentence
    }

    /// The one line printed at the end of an `audit`.
    package var auditSummaryLine: String {
        guard let sentence = auditSentence else { return repairSummaryLine }
        return sentence + "; \(counts.subscriptionStatusesRequests) statuses and \(counts.transactionHistoryRequests) transaction history requests"
            + (counts.rateLimited > 0 ? ", \(counts.rateLimited) rate-limited (429) and retried after Retry-After" : "")
    }

    func writeAudit(_ line: (String) -> Void) {
        guard let audit, let sentence = auditSentence else { return }
        line("## Audit")
        line("")
        line(sentence.prefix(1).uppercased() + sentence.dropFirst() + ".")
        line("")
        line("Requested \(audit.requested); compared \(audit.sampled); differing \(audit.differing); upper bound (95%, exact binomial) \(Self.percent(audit.upperBound95)).")
        line("")
        if !audit.differences.isEmpty {
            line("| account | originalTransactionId | transactionId | field | ledger | Apple |")
            line("| --- | --- | --- | --- | --- | --- |")
            for difference in audit.differences {
                line(
                    "| \(difference.account) | \(difference.originalTransactionId ?? "") | \(difference.transactionId ?? "") | \(difference.field) "
                        + "| \(difference.ledger ?? "(none)") | \(difference.apple ?? "(none)") |")
            }
            line("")
        }
        if !audit.unknownToApple.isEmpty {
            line("Unknown to Apple (not counted as differing): " + audit.unknownToApple.map { "\($0.originalTransactionId) (\($0.appleAnswer ?? "?"))" }.joined(separator: ", "))
            line("")
        }
    }

    func auditSection(limits: HTMLLimits) -> String {
        guard let audit, let sentence = auditSentence else { return "" }
        var html = "<h2 id=\"audit\">Audit</h2>\n<p>\(HTMLPage.escape(sentence.prefix(1).uppercased() + sentence.dropFirst())).</p>\n"
        html += "<table><tbody><tr><th>requested</th><td>\(HTMLPage.number(audit.requested))</td></tr>"
            + "<tr><th>compared</th><td>\(HTMLPage.number(audit.sampled))</td></tr>"
            + "<tr><th>differing</th><td>\(HTMLPage.number(audit.differing))</td></tr>"
            + "<tr><th>upper bound, 95% (exact binomial)</th><td><strong>\(HTMLPage.escape(Self.percent(audit.upperBound95)))</strong></td></tr>"
            + "<tr><th>unknown to Apple</th><td>\(HTMLPage.number(audit.unknownToApple.count))</td></tr>"
            + "<tr><th>not compared</th><td>\(HTMLPage.number(audit.notCompared))</td></tr></tbody></table>\n"
        if !audit.differences.isEmpty {
            html += "<table><thead><tr><th>account</th><th>originalTransactionId</th><th>transactionId</th><th>field</th><th>ledger</th><th>Apple</th></tr></thead><tbody>"
            for difference in audit.differences.prefix(limits.rowsPerList) {
                html += "<tr><td><code>\(HTMLPage.escape(difference.account))</code></td><td><code>\(HTMLPage.escape(difference.originalTransactionId ?? ""))</code></td>"
                    + "<td><code>\(HTMLPage.escape(difference.transactionId ?? ""))</code></td><td>\(HTMLPage.escape(difference.field))</td>"
                    + "<td>\(HTMLPage.escape(difference.ledger ?? "(none)"))</td><td>\(HTMLPage.escape(difference.apple ?? "(none)"))</td></tr>"
            }
            html += "</tbody></table>\n"
            if audit.differences.count > limits.rowsPerList {
                html += "<p class=\"muted\">The first \(limits.rowsPerList) of \(HTMLPage.number(audit.differences.count)); report.json and report.md list every one.</p>\n"
            }
        }
        return html
    }
}
