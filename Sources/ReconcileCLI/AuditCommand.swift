import ArgumentParser
import Deployment
import Foundation
import Reconciliation
import Reports

struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Compare a random sample of the ledger's accounts with Apple, and state how wrong the ledger can be.",
        discussion: """
            For each App Store of the configuration, draws a uniformly random sample of its subscriptions (without \
            reading the ledger whole: one index lookup a probe) and asks Apple about each one's account whole, as a \
            named repair does: Get All Subscription Statuses, and the transaction history from its start, every \
            answer verified. Each account is compared field by field with the ledger. report.json's `audit` gives \
            the accounts compared (`sampled`), those that differ (`differing`), each difference (account, field, \
            the ledger's value and Apple's), and `upperBound95`: the exact binomial upper bound, at 95% \
            confidence, of the share of the ledger's accounts that differ (0 of 3,000 gives under 0.1%). An \
            account Apple does not know is reported apart, not counted as differing. Apple's 429s and 5xx are \
            retried as every request is; an audit cut short says so, and its bound is over what it compared. \
            Without --repair nothing is written to the ledger but the audit's own row (kind `audit` in \
            app_store.runs, whose bound serve exposes as appstore_reconcile_audit_drift_upper_bound) and no run \
            lock is taken; with --repair the differing accounts get Apple's answer, under the run lock. Exit 3 \
            when accounts differ and were not repaired, or some could not be compared.

            \(ExitStatus.summary)
            """
    )

    @Option(help: "Accounts to compare per App Store (at least 1; more than it has compares them all).")
    var sample = 1_000

    @Flag(help: "Write Apple's answer over the accounts that differ (takes the run lock).")
    var repair = false

    @Option(help: "Where to write report.html, report.md and report.json (default: ./appstore-reconcile-audit-TIMESTAMP).")
    var reportDir: String?

    @Option(help: "Accounts compared at once.")
    var concurrency = 8

    @Flag(help: "No live progress line.")
    var noProgress = false

    @OptionGroup var options: ConfigurationOptions

    func validate() throws {
        guard sample >= 1 else { throw ValidationError("--sample must be at least 1 (it was \(sample))") }
        guard concurrency >= 1 else { throw ValidationError("--concurrency must be at least 1") }
    }

    func run() async throws {
        try await withExitStatus {
            let deployment = try options.deployment()
            let directory = reportDir ?? ReportFiles.defaultDirectory(prefix: "appstore-reconcile-audit", dryRun: false)
            let layout = RunLayout(deployment)
            let job = RunService.Job.audit(sample: sample, repair: repair, concurrency: concurrency)
            let results = try await deployment.runReconciliations(
                label: "audit", layout: layout, progress: !noProgress, concurrency: RecoveryRunOptions.defaultConcurrentPairs
            ) { _ in job }
            try conclude(results, layout: layout, reportDirectory: directory, dryRun: false, title: "appstore-reconcile audit", summary: \.auditSummaryLine)
        }
    }
}
