import AppStoreServerModel
import Decisions
import Foundation
import LedgerModel
import RemedyDecisions
import RunResults

/// The refund requests a run answered (`consumption-requests --answer`), in report.md and
/// report.html: each request with its deadline, what came of it and what was sent.
extension RecoveryReport {
    /// "2 sent, 1 no_facts" (in the order of the table's outcomes), or nil without answers.
    var answersSentence: String? {
        guard let answers else { return nil }
        guard !answers.isEmpty else { return "no open refund request" }
        var counts: [String: Int] = [:]
        for answer in answers { counts[answer.outcome, default: 0] += 1 }
        let order = [RefundAnswerReport.wouldSend] + ConsumptionAnswerRecord.outcomes + [RefundAnswerReport.notSupported]
        return order.compactMap { outcome in counts[outcome].map { "\($0) \(outcome)" } }.joined(separator: ", ")
    }

    /// What an outcome means, in a few words.
    static func meaning(ofAnswer outcome: String) -> String {
        switch outcome {
        case "sent": "Apple took it (202); the request is answered"
        case RefundAnswerReport.wouldSend: "a real run would send it"
        case "no_facts": "your facts query returned no row: nothing sent"
        case "no_consent": "customer_consented is not true: nothing may be sent"
        case "invalid": "a value Apple refuses: nothing sent; fix the facts"
        case "failed": "not answered; the next check tries again while the deadline is ahead"
        case RefundAnswerReport.notSupported: "Apple takes no answer about such a transaction (Family Sharing, ASSIGNED): nothing sent, nothing to do"
        default: outcome
        }
    }

    /// The sent body, briefly: "DELIVERED, sample, 40000 milliunits, DECLINE".
    static func brief(_ sent: ConsumptionInformation?) -> String {
        guard let sent else { return "" }
        var parts = [sent.deliveryStatus.rawValue, sent.sampleContentProvided ? "sample offered" : "no sample"]
        if let percentage = sent.consumptionPercentage { parts.append("\(percentage) milliunits consumed") }
        if let preference = sent.refundPreference { parts.append(preference.rawValue) }
        return parts.joined(separator: ", ")
    }

    /// report.md's section.
    func writeAnswers(_ line: (String) -> Void) {
        guard let answers else { return }
        line("## Refund requests answered with Send Consumption Information (\(answers.count))")
        line("")
        line(
            "Every open refund request (not answered, deadline ahead, not decided by Apple) was answered from your facts query, "
                + "`\(ConsumptionDeadline.endpoint)`; `app_store.consumption_answers` keeps what was sent and Apple's answer. "
                + (isDryRun ? "Dry run: nothing was sent or written." : "")
        )
        line("")
        if answers.isEmpty {
            line("None was open.")
            line("")
            return
        }
        line("**\(answersSentence ?? "").**")
        line("")
        line("| transactionId | originalTransactionId | answer by | outcome | sent | detail |")
        line("| --- | --- | --- | --- | --- | --- |")
        for answer in answers {
            let detail = (answer.detail ?? Self.meaning(ofAnswer: answer.outcome)).replacingOccurrences(of: "|", with: "\\|")
            line("| \(answer.transactionId) | \(answer.originalTransactionId) | \(answer.deadline) | \(answer.outcome) | \(Self.brief(answer.sent)) | \(detail) |")
        }
        line("")
    }

    /// report.html's section.
    func answersSection(limits: HTMLLimits) -> String {
        guard let answers else { return "" }
        var html = "<h2 id=\"answers\">Refund requests answered</h2>\n<p>Every open refund request (not answered, deadline ahead, not decided by Apple) "
            + "was answered from your facts query with Send Consumption Information (<code>\(HTMLPage.escape(ConsumptionDeadline.endpoint))</code>); "
            + "<code>app_store.consumption_answers</code> keeps what was sent and Apple's answer."
            + (isDryRun ? " <strong>Dry run: nothing was sent or written.</strong>" : "") + "</p>\n"
        guard !answers.isEmpty else { return html + "<p>None was open.</p>\n" }
        html += "<p><strong>\(HTMLPage.escape(answersSentence ?? "")).</strong></p>\n"
            + "<table><thead><tr><th>transactionId</th><th>originalTransactionId</th><th>answer by</th><th>outcome</th><th>sent</th><th>detail</th></tr></thead><tbody>"
        for answer in answers.prefix(limits.rowsPerList) {
            let badge = answer.needsAPerson ? "bad" : (answer.outcome == "sent" || answer.outcome == RefundAnswerReport.wouldSend ? "good" : "warn")
            html += "<tr><td class=\"id\">\(HTMLPage.escape(answer.transactionId))</td><td class=\"id\">\(HTMLPage.escape(answer.originalTransactionId))</td>"
                + "<td>\(HTMLPage.time(answer.deadline))</td><td><span class=\"badge \(badge)\">\(HTMLPage.escape(answer.outcome))</span></td>"
                + "<td>\(HTMLPage.escape(Self.brief(answer.sent)))</td><td>\(HTMLPage.escape(answer.detail ?? Self.meaning(ofAnswer: answer.outcome)))</td></tr>"
        }
        return html + "</tbody></table>" + more(answers.count - limits.rowsPerList) + "\n"
    }
}
