import Foundation
import RunResults
package import SignedData

/// `report.html` of a run over several App Stores: one line per (app, environment) pair with how
/// its run ended, its summary, and a link to its own report (`<bundleId>/<environment>/report.html`).
package struct DeploymentSummaryPage: Sendable {
    package struct Entry: Sendable {
        package var pair: AppStorePair
        /// "succeeded", "failed", … (`RunOutcome`), or the failure's kind for a run that threw.
        package var outcome: String
        /// The run's summary line, or the failure's message.
        package var summary: String
        /// Whether the pair's own report was written (a run that failed before it ends without one).
        package var hasReport: Bool

        package init(pair: AppStorePair, outcome: String, summary: String, hasReport: Bool) {
            self.pair = pair
            self.outcome = outcome
            self.summary = summary
            self.hasReport = hasReport
        }
    }

    package var title: String
    package var entries: [Entry]

    package init(title: String, entries: [Entry]) {
        self.title = title
        self.entries = entries
    }

    package var html: String {
        var page = HTMLPage.head(title: title)
        page += "<h1>\(HTMLPage.escape(title))</h1>\n"
        page += "<p>\(HTMLPage.count(entries.count, "App Store")) (app and environment), each run on its own, side by side.</p>\n"
        page += "<table>\n<thead><tr><th>App</th><th>Environment</th><th>Outcome</th><th>Summary</th><th>Report</th></tr></thead>\n<tbody>\n"
        for entry in entries.sorted(by: { $0.pair < $1.pair }) {
            let link = entry.hasReport ? "<a href=\"\(HTMLPage.escape(entry.pair.path))/report.html\">report</a>" : "none"
            page += "<tr><td>\(HTMLPage.escape(entry.pair.bundleId))</td><td>\(HTMLPage.escape(entry.pair.environment.rawValue))</td>"
            page += "<td>\(HTMLPage.escape(entry.outcome))</td><td>\(HTMLPage.escape(entry.summary))</td><td>\(link)</td></tr>\n"
        }
        page += "</tbody>\n</table>\n"
        return page + HTMLPage.foot
    }
}
