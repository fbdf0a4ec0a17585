import Decisions
import Foundation
import RunResults

/// An `import`'s lines in the reports: report.json's `import`, report.md's and report.html's
/// section, and the line the command prints.
extension RecoveryReport {
    /// report.json's `import`, without its problems (streamed after it).
    struct ImportFields: Encodable {
        var kind: String
        var inputSHA256: String
        var linesTotal: Int
        var linesResumedPast: Int
        var linesRead: Int
        var accountsAsked: Int
        var repeats: Int
        var orderLookups: Int
        /// Accounts Production did not know, imported from the app's Sandbox pair.
        var accountsFromSandbox: Int
        var linesNotImported: Int
        /// Lines not imported per reason, every one counted.
        var linesNotImportedByReason: [String: Int]
        /// Whether `problems[]` lists only a sample: the first of each reason (`ImportResult`).
        var problemsSampled: Bool
        var stopped: Bool
    }

    var importFields: ImportFields? {
        guard let imported else { return nil }
        return ImportFields(
            kind: imported.kind.rawValue, inputSHA256: imported.inputSHA256, linesTotal: imported.linesTotal, linesResumedPast: imported.linesResumedPast,
            linesRead: imported.linesRead, accountsAsked: imported.accountsAsked, repeats: imported.repeats, orderLookups: imported.orderLookups,
            accountsFromSandbox: imported.accountsFromSandbox, linesNotImported: imported.linesNotImported, linesNotImportedByReason: imported.linesNotImportedByReason,
            problemsSampled: imported.problemsSampled, stopped: imported.stopped
        )
    }

    /// The one line printed at the end of an `import`.
    package var importSummaryLine: String {
        guard let imported else { return repairSummaryLine }
        let would = isDryRun ? "would import" : "imported"
        var line = "lines \(imported.linesResumedPast + imported.linesRead) of \(imported.linesTotal)"
            + (imported.linesResumedPast > 0 ? " (\(imported.linesResumedPast) done by an earlier run of this input)" : "")
            + "; accounts asked about \(imported.accountsAsked), \(counts.customersRepaired) \(would == "imported" ? "changed" : "would change")"
            + ", \(imported.repeats) repeated lines not asked again"
            + (imported.accountsFromSandbox > 0 ? ", \(imported.accountsFromSandbox) found in Sandbox (App Review, TestFlight)" : "")
        if imported.linesNotImported > 0 { line += "; \(imported.linesNotImported) lines not imported (see the report)" }
        line += "; \(counts.subscriptionStatusesRequests) statuses and \(counts.transactionHistoryRequests) transaction history requests"
        if imported.orderLookups > 0 { line += ", \(imported.orderLookups) order look-ups" }
        if counts.rateLimited > 0 { line += ", \(counts.rateLimited) rate-limited (429) and retried after Retry-After" }
        return line
    }

    /// report.md's section.
    func writeImport(_ line: (String) -> Void) {
        guard let imported, let fields = importFields else { return }
        line("## Import (\(imported.kind.flag))")
        line("")
        line(
            "Input SHA-256 `\(imported.inputSHA256)`: \(fields.linesTotal) lines; \(fields.linesResumedPast) done by an earlier run of this input, "
                + "\(fields.linesRead) read now. Accounts asked about: \(fields.accountsAsked); repeated lines not asked again: \(fields.repeats)"
                + (fields.orderLookups > 0 ? "; order look-ups: \(fields.orderLookups)" : "")
                + (fields.accountsFromSandbox > 0 ? "; found in the app's Sandbox environment (App Review, TestFlight): \(fields.accountsFromSandbox)" : "") + ". "
                + (isDryRun ? "Dry run: nothing was written, no checkpoint kept." : "Each account is in the repairs below (reason `imported`).")
        )
        line("")
        guard imported.linesNotImported > 0 else { return }
        line("### Lines not imported (\(imported.linesNotImported))")
        line("")
        if imported.problemsSampled {
            line("By reason: " + Self.reasonCounts(imported).map { "\($0.reason.replacingOccurrences(of: "|", with: "\\|")): \($0.count)" }.joined(separator: "; ") + ".")
            line("")
            line(Self.sampleNote(imported))
            line("")
        }
        line("| line | value | reason |")
        line("| --- | --- | --- |")
        for problem in imported.problems {
            line("| \(problem.line) | \(problem.value.replacingOccurrences(of: "|", with: "\\|")) | \(problem.reason.replacingOccurrences(of: "|", with: "\\|")) |")
        }
        line("")
    }

    /// report.html's section.
    func importSection(limits: HTMLLimits) -> String {
        guard let imported, let fields = importFields else { return "" }
        var html = "<h2 id=\"import\">Import (<code>\(imported.kind.flag)</code>)</h2>\n<p>\(HTMLPage.count(fields.linesTotal, "line")) in the input "
            + "(SHA-256 <code>\(HTMLPage.escape(String(imported.inputSHA256.prefix(16))))…</code>): \(HTMLPage.number(fields.linesResumedPast)) done by an earlier run of it, "
            + "\(HTMLPage.number(fields.linesRead)) read now; \(HTMLPage.count(fields.accountsAsked, "account")) asked about, "
            + "\(HTMLPage.count(fields.repeats, "repeated line")) not asked again"
            + (fields.orderLookups > 0 ? ", \(HTMLPage.count(fields.orderLookups, "order look-up"))" : "")
            + (fields.accountsFromSandbox > 0 ? ", \(HTMLPage.count(fields.accountsFromSandbox, "account")) found in Sandbox (App Review, TestFlight)" : "") + "."
            + (isDryRun ? " <strong>Dry run: nothing was written.</strong>" : "") + "</p>\n"
        guard imported.linesNotImported > 0 else { return html }
        html += "<h3>Lines not imported (\(HTMLPage.number(imported.linesNotImported)))</h3>\n"
        if imported.problemsSampled {
            html += "<p>By reason: " + Self.reasonCounts(imported).map { "\(HTMLPage.escape($0.reason)): \(HTMLPage.number($0.count))" }.joined(separator: "; ")
                + ".</p>\n<p class=\"muted\">\(HTMLPage.escape(Self.sampleNote(imported)))</p>\n"
        }
        html += "<table><thead><tr><th>line</th><th>value</th><th>reason</th></tr></thead><tbody>"
        for problem in imported.problems.prefix(limits.rowsPerList) {
            html += "<tr><td>\(problem.line)</td><td><code>\(HTMLPage.escape(problem.value))</code></td><td>\(HTMLPage.escape(problem.reason))</td></tr>"
        }
        html += "</tbody></table>\n"
        if imported.problems.count > limits.rowsPerList {
            html += "<p class=\"muted\">The first \(limits.rowsPerList) of the \(HTMLPage.number(imported.problems.count)) listed; report.json and report.md list every one of them.</p>\n"
        }
        return html
    }

    /// Each reason with its lines not imported, most first.
    static func reasonCounts(_ imported: ImportResult) -> [(reason: String, count: Int)] {
        imported.linesNotImportedByReason.map { ($0.key, $0.value) }.sorted { ($0.count, $1.reason) > ($1.count, $0.reason) }
    }

    /// What the sample of lines not imported leaves out.
    static func sampleNote(_ imported: ImportResult) -> String {
        "Listed below: \(imported.problems.count) of the \(imported.linesNotImported) lines not imported, the first "
            + "\(ImportResult.sampledPerReason) of each reason (at most \(ImportResult.sampledInAll) in all); "
            + "the other \(imported.linesNotImported - imported.problems.count) are counted only."
    }
}
