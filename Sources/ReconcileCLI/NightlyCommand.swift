import ArgumentParser
import Decisions
import Deployment
import Foundation
import Ledger
import Logging
import Reconciliation
import SignedData

struct NightlyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "nightly",
        abstract: "Recover the time since the last successful run: the job to schedule every night.",
        discussion: """
            Does what `run` does, for the window from the end of the last successful nightly run's window, less --overlap-hours \
            (Apple's late retries arrive out of order), to --settle-minutes before now. After a failed or interrupted \
            run the next one starts from the last success, so nothing missed stays missed. The first nightly run \
            needs --start, or --from-retention-limit for all the history Apple keeps.

            Then it audits a random sample of each App Store's accounts against Apple (as `audit --repair` does: \
            what differs is mended, and the bound is recorded for serve's appstore_reconcile_audit_drift_upper_bound): \
            the configuration's audit.sample accounts (default 300; 0: none) at no more than \
            audit.maxShareOfRateLimit of Apple's rate (default 0.1). report.json's `audit` gives what it found.

            \(ExitStatus.summary)
            """
    )

    @Option(help: "Where the first nightly run starts (ISO 8601 or UNIX milliseconds); ignored once a run succeeded.", transform: OutageWindow.argument)
    var start: Date?

    @Flag(help: "With no successful run recorded, start at the oldest time Apple's history keeps.")
    var fromRetentionLimit = false

    @Option(help: "Hours before the last success's window end to start again from.")
    var overlapHours = 2.0

    @Option(help: "Minutes before now to stop at.")
    var settleMinutes = 5.0

    @Option(help: ArgumentHelp("Days a rejected payload is kept after it was last seen (app_store.rejected_payloads); 0 keeps them all.", valueName: "days"))
    var keepRejectedDays = 30

    @Option(help: "Accounts per App Store the audit after the passes compares (0: no audit); default: the configuration's audit.sample, else 300.")
    var auditSample: Int?

    @OptionGroup var recovery: RecoveryRunOptions

    @OptionGroup var options: ConfigurationOptions

    func validate() throws {
        guard overlapHours >= 0, settleMinutes >= 0 else { throw ValidationError("--overlap-hours and --settle-minutes must not be negative") }
        guard keepRejectedDays >= 0 else { throw ValidationError("--keep-rejected-days must not be negative") }
        if let auditSample, auditSample < 0 { throw ValidationError("--audit-sample must not be negative (0: no audit)") }
    }

    func run() async throws {
        try await withExitStatus(logFormat: recovery.logFormat, job: true) {
            let firstStart = start ?? (fromRetentionLimit ? .distantPast : nil)
            // Housekeeping, not the run: when the database fails here, the run goes on to fail on
            // its own, recorded as failed in its metrics file (an alert) with its own exit code.
            if keepRejectedDays > 0, !recovery.dryRun {
                do {
                    try await pruneRejectedPayloads()
                } catch {
                    // Worded as every failure is (FailureReport: no secret), so a lasting one is seen.
                    printError("rejected payloads not pruned this time, the run goes on: \(FailureReport(error).line)", level: .warning)
                }
            }
            let window = ReconciliationRun.WindowChoice.nightly(firstStart: firstStart, overlap: overlapHours * 3600, settle: settleMinutes * 60)
            try await recovery.execute(recovery.request(kind: .nightly, window: window), configuration: options, auditSample: auditSample)
        }
    }
}

extension NightlyCommand {
    /// The retention of `app_store.rejected_payloads`, before the run: anyone can POST to
    /// `serve`, so what it rejects must not pile up for ever.
    func pruneRejectedPayloads() async throws {
        let url = try options.database.settings.databaseURL()
        let logger = Logger(label: "appstore-reconcile.nightly")
        let days = keepRejectedDays
        let deleted = try await LedgerDatabase.withStore(url, logger: logger) { store in
            try await store.pruneRejectedPayloads(notSeenForDays: days)
        }
        if deleted > 0 { logger.notice("deleted \(deleted) rejected payloads not seen for \(days) days") }
    }
}
