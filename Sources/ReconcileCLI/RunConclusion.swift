import ArgumentParser
import Decisions
import Foundation
import Reports
import Ledger
import Logging
import Reconciliation

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
}

/// What the operator sees as a run ends: the report files written (for a run that finished),
/// the summary line, what needs a person, and the exit status; every word of it rendered from
/// the run's result.
func conclude(_ result: RunResult, reportDirectory: String?, summary: (RecoveryReport) -> String) throws {
    let status = ExitStatus.of(result.outcome)
    if result.ending == .stopped {
        let stopped = FailureReport(RunStopped())
        printError(stopped.line, level: stopped.level)
        throw ExitCode(status)
    }
    let report = RecoveryReport(result)
    let directory = try ReportFiles.write(report, to: reportDirectory)
    print((result.dryRun ? "Dry run: " : "Done: ") + summary(report))
    print("Report: \(directory)/report.html (also report.md and report.json)")
    if let moved = result.passOne?.startMovedTo, let window = result.passOne?.window {
        printError(
            "warning: Apple's history stopped holding the window's start while the run paged (StartDateTooFarInPastError); "
                + "it was recovered from \(moved.formatted(.iso8601)): what was signed between \(window.start.formatted(.iso8601)) and then had left Apple's history",
            level: .warning
        )
    }
    let problems = result.problems
    if problems.any {
        var parts: [String] = []
        if result.passOne != nil {
            parts.append("\(problems.rejected) payload(s) rejected, \(problems.retryLater) left for retry")
        } else if problems.rejected > 0 {
            parts.append("\(problems.rejected) payload(s) rejected")
        }
        if result.passTwo != nil || problems.customersFailed > 0 { parts.append("\(problems.customersFailed) account(s) Apple could not answer for") }
        if problems.undelivered > 0 { parts.append("\(problems.undelivered) notification(s) not delivered to your handler (pending)") }
        printError("finished with problems: \(parts.joined(separator: ", ")): see the report", level: .warning)
    }
    if status != ExitStatus.success { throw ExitCode(status) }
}
