import Decisions
package import Foundation
package import RunResults
import SignedData

/// `detect-outage`'s report.html: the verdict (how many outages, how many notifications Apple
/// has not delivered), the scanned period's chart of failed first attempts with each outage
/// shaded, and one row per outage with the `run` command that recovers it.
package enum OutageReportPage {
    package static func html(_ result: OutageScanResult, commands: [String], finishedAt: Date = Date()) -> String {
        var html = HTMLPage.head(title: "Outages found · \(result.environment.rawValue)")
        html += "<h1>Outages: when Apple could not deliver notifications to your server</h1>\n"
        let outages = result.outages
        let verdict: String
        if outages.isEmpty {
            verdict = result.undelivered == 0
                ? "<strong>No outage:</strong> Apple delivered every notification of the period. Nothing needs a person."
                : "\(HTMLPage.count(result.undelivered, "notification")) not delivered, none with a failed first attempt recorded. Nothing to recover from here."
        } else {
            verdict = "<strong>\(HTMLPage.count(outages.count, "outage")) found</strong>: \(HTMLPage.count(result.undelivered, "notification")) Apple has not delivered. "
                + "<strong>Needs a person:</strong> run the recovery command of each outage below (a dry run first)."
        }
        html += "<p class=\"verdict\(outages.isEmpty ? "" : " attention")\" id=\"verdict\">\(verdict)</p>\n"
        let start = ReportTimeline.iso(result.window.start)
        let end = ReportTimeline.iso(result.window.end)
        html += "<dl class=\"facts\"><dt>Scanned</dt><dd>\(HTMLPage.time(start)) to \(HTMLPage.time(end)) "
            + "<span class=\"muted\">(\(HTMLPage.duration(result.window.end.timeIntervalSince(result.window.start))))</span></dd>"
            + "<dt>Environment</dt><dd>\(HTMLPage.escape(result.environment.rawValue))</dd>"
            + "<dt>Mode</dt><dd>read only: Get Notification History with onlyFailures; nothing was written</dd>"
            + "<dt>Requests to Apple</dt><dd>\(HTMLPage.number(result.requests)) Get Notification History</dd>"
            + "<dt>Finished</dt><dd>\(HTMLPage.time(ReportTimeline.iso(finishedAt), seconds: true))</dd></dl>\n"
        let timeline = result.timeline
        html += "<h2 id=\"timeline-heading\">The period, one bar group per \(TimelineChart.stepName(timeline.stepSeconds)) (UTC)</h2>\n"
        html += "<p class=\"muted\">\(HTMLPage.count(timeline.failedTotal, "failed first delivery attempt")) of notifications Apple has not delivered, "
            + "stacked by sendAttemptResult; shaded: the outages found. A notification Apple delivered on a later retry is not in onlyFailures, "
            + "so an outage Apple's retries covered shows only what they never delivered.</p>\n"
        html += TimelineChart.svg(timeline, shaded: timeline.outages ?? []) + "\n" + TimelineChart.legend(timeline, showsMissed: false) + "\n"
        html += TimelineChart.closeUp(timeline)
        html += "<h2 id=\"outages\">Outages (\(HTMLPage.number(outages.count)))</h2>\n"
        if outages.isEmpty {
            html += "<p>None.</p>\n"
        } else {
            html += "<table id=\"outages-table\"><thead><tr><th>#</th><th>first failed attempt</th><th>last</th><th class=\"num\">notifications</th><th>by sendAttemptResult</th></tr></thead><tbody>"
            for (index, outage) in outages.enumerated() {
                let results = outage.byResult.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { "\(HTMLPage.escape($0.key)) \(HTMLPage.number($0.value))" }
                html += "<tr data-notifications=\"\(outage.notifications)\"><td>\(index + 1)</td><td>\(HTMLPage.time(ReportTimeline.iso(outage.firstFailure)))</td>"
                    + "<td>\(HTMLPage.time(ReportTimeline.iso(outage.lastFailure))) <span class=\"muted\">(\(HTMLPage.duration(outage.lastFailure.timeIntervalSince(outage.firstFailure))))</span></td>"
                    + "<td class=\"num\">\(HTMLPage.number(outage.notifications))</td><td>\(results.joined(separator: ", "))</td></tr>"
                if index < commands.count {
                    html += "<tr><td></td><td colspan=\"4\">recover: <code>\(HTMLPage.escape(commands[index]))</code></td></tr>"
                }
            }
            html += "</tbody></table>\n"
        }
        html += "<p class=\"muted\">Beside this file: report.md (the same as text) and report.json (for scripts). Times are UTC; hover over one for your local time.</p>\n"
        return html + HTMLPage.foot
    }
}
