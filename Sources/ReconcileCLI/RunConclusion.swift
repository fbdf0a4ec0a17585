import ArgumentParser
import Decisions
import Deployment
import Foundation
import Ledger
import Logging
import Reconciliation
import Reports
import SignedData

extension ExitStatus {
    /// The exit status of a run that returned, from its outcome (`RunResult.outcome`): the one
    /// table every command that runs one (`run`, `nightly`, `consumption-requests`, `repair`) uses.
    static func of(_ outcome: RunOutcome) -> Int32 {
        switch outcome {
        case .succeeded: success
        case .succeededWithRejections: doneWithRejections
        case .interrupted: interrupted
        case .failed, .running, .abandoned: failure
        }
    }

    /// The order of seriousness a run over several pairs reports the worst of: interrupted (130),
    /// then a configuration error (78), an unexpected failure (1), a temporary one (75), a
    /// payload rejected (65), done with rejections or problems (3), success (0).
    static let seriousness: [Int32] = [interrupted, configuration, failure, temporaryFailure, payloadRejected, doneWithRejections, success]

    /// The most serious of these statuses (`seriousness`); an unlisted one counts as a failure.
    static func mostSerious(_ statuses: [Int32]) -> Int32 {
        statuses.min { rank($0) < rank($1) } ?? success
    }

    private static func rank(_ status: Int32) -> Int {
        seriousness.firstIndex(of: status) ?? seriousness.firstIndex(of: failure)!
    }
}

/// What the operator sees as a run over the deployment's pairs ends, every word of it rendered
/// from the runs' results: each finished pair's report files, its summary line and what needs
/// a person; with several pairs `DIR/report.html` linking them; and the most serious pair's
/// exit status. With one pair (`RunLayout.onePair`) its failure is the command's.
func conclude(
    _ results: [Deployment.PairResult], layout: RunLayout, reportDirectory: String?, dryRun: Bool, title: String,
    summary: (RecoveryReport) -> String
) throws {
    if case .onePair = layout, case .failure(let error) = results[0].result { throw error }
    let directory = reportDirectory ?? ReportFiles.defaultDirectory(prefix: "appstore-reconcile-report", dryRun: dryRun)
    var entries: [DeploymentSummaryPage.Entry] = []
    var statuses: [Int32] = []
    for (pair, result) in results.map({ ($0.pair, $0.result) }) {
        let prefix = layout.prefix(pair)
        let run: RunResult
        switch result {
        case .success(let value): run = value
        case .failure(let error):
            let failure = FailureReport(error)
            statuses.append(ExitStatus.of(failure.kind))
            entries.append(.init(pair: pair, outcome: "failed (\(failure.kind))", summary: failure.line, hasReport: false))
            printError(prefix + failure.line, level: failure.level)
            continue
        }
        statuses.append(ExitStatus.of(run.outcome))
        if run.ending == .stopped {
            let stopped = FailureReport(RunStopped())
            entries.append(.init(pair: pair, outcome: run.outcome.rawValue, summary: stopped.line, hasReport: false))
            printError(prefix + stopped.line, level: stopped.level)
            continue
        }
        let report = RecoveryReport(run)
        let line = summary(report)
        let pairDirectory = layout.reportDirectory(of: pair, in: directory)
        do {
            try report.writeFiles(to: pairDirectory)
        } catch {
            // This pair's report is lost, not the others' nor the summary.
            let failure = FailureReport(error)
            statuses.append(ExitStatus.of(failure.kind))
            entries.append(.init(pair: pair, outcome: run.outcome.rawValue, summary: line + " (report not written: \(failure.line))", hasReport: false))
            printError(prefix + failure.line, level: failure.level)
            continue
        }
        entries.append(.init(pair: pair, outcome: run.outcome.rawValue, summary: line, hasReport: true))
        tellEnd(of: run, pair: pair, line: line, layout: layout, directory: pairDirectory)
    }
    if case .sideBySide(let count) = layout {
        try ReportFiles.write(["report.html": DeploymentSummaryPage(title: "\(title): \(count) App Stores", entries: entries).html], to: directory)
        print("Report: \(directory)/report.html (each pair's in \(directory)/<bundleId>/<environment>/)")
    }
    let status = ExitStatus.mostSerious(statuses)
    if status != ExitStatus.success { throw ExitCode(status) }
}

extension RunLayout {
    /// Where the pair's report goes: DIR itself for one pair, `DIR/<bundleId>/<environment>` for several.
    func reportDirectory(of pair: AppStorePair, in directory: String) -> String {
        switch self {
        case .onePair: directory
        case .sideBySide: directory + "/" + pair.path
        }
    }
}

/// A finished pair's lines: its summary, where its report is, and what needs a person.
private func tellEnd(of run: RunResult, pair: AppStorePair, line: String, layout: RunLayout, directory: String) {
    let prefix = layout.prefix(pair)
    switch layout {
    case .onePair:
        // An audit without --repair compares and writes nothing: not a dry run of something else.
        print((run.dryRun && run.audited == nil ? "Dry run: " : "Done: ") + line)
        print("Report: \(directory)/report.html (also report.md and report.json)")
    case .sideBySide:
        print(prefix + (run.dryRun && run.audited == nil ? "dry run: " : "done: ") + line)
    }
    if let moved = run.passOne?.startMovedTo, let window = run.passOne?.window {
        printError(
            prefix + "warning: Apple's history stopped holding the window's start while the run paged (StartDateTooFarInPastError); "
                + "it was recovered from \(moved.formatted(.iso8601)): what was signed between \(window.start.formatted(.iso8601)) and then had left Apple's history",
            level: .warning
        )
    }
    let problems = run.problems
    guard problems.any else { return }
    var parts: [String] = []
    if run.passOne != nil, problems.rejected + problems.retryLater > 0 || problems.answersNotSent == 0 {
        parts.append("\(problems.rejected) payload(s) rejected, \(problems.retryLater) left for retry")
    } else if problems.rejected > 0 {
        parts.append("\(problems.rejected) payload(s) rejected")
    }
    if (run.passTwo != nil && run.audited == nil) || problems.customersFailed > 0 {
        parts.append("\(problems.customersFailed) account(s) Apple could not answer for")
    }
    if problems.accountsDiffering > 0 { parts.append("\(problems.accountsDiffering) account(s) differ from Apple, not repaired (audit --repair mends them)") }
    if problems.undelivered > 0 { parts.append("\(problems.undelivered) notification(s) not delivered to your handler (pending)") }
    if problems.linesNotImported > 0 { parts.append("\(problems.linesNotImported) input line(s) not imported (garbled, unknown to Apple, an invalid order)") }
    if problems.answersNotSent > 0 { parts.append("\(problems.answersNotSent) refund request(s) not answered (invalid facts, Apple's refusal or no reply)") }
    if problems.extensionsNotMade > 0 { parts.append("\(problems.extensionsNotMade) extension(s) refused by Apple or not answered (pending)") }
    let see = if case .onePair = layout { "see the report" } else { "see \(directory)/report.html" }
    printError(prefix + "finished with problems: \(parts.joined(separator: ", ")): \(see)", level: .warning)
}
