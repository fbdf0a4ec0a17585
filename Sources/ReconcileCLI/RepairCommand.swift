import AppStoreServerAPI
import ArgumentParser
import Deployment
import Foundation
import Reports
import Ledger
import Logging
import Reconciliation
import SignedData

struct RepairCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "repair",
        abstract: "Repair Apple accounts from Apple's present state, without recovering a window first.",
        discussion: """
            Apple answers for a customer's whole Apple Account in the app (every originalTransactionId: each \
            subscription group, one-time and family-shared purchases), so repairs are per account. With \
            --transaction-id (any transaction ID of the account, digits only; repeatable), repairs exactly those \
            accounts, statuses and whole transaction history: for support cases. Without it, repairs every account \
            of this environment whose stored state contradicts itself since it was last checked: an active \
            subscription whose expiry has passed, a subscription row older than its newest transaction, a renewal \
            after a lapse with no billing failure or expiry recorded, an expiry that skips the step before it. \
            Get All Subscription Statuses once per account; Get Transaction History from the account's stored \
            revision (only what changed since) where transactions need checking. Every answer is verified; only rows \
            whose content differs are written, with the account's revision and members. An account Apple cannot \
            answer for (4040001, 4000006, 4040010, retries exhausted) is reported and the others repaired (exit 3). \
            --dry-run writes nothing and stores no revision.

            \(ExitStatus.summary)
            """
    )

    @Option(name: .customLong("transaction-id"), help: "A transaction ID of a customer to repair (repeatable).")
    var transactionIds: [String] = []

    @Flag(help: "Fetch and compare, write nothing, store no revision, and report what would change.")
    var dryRun = false

    @Option(help: "Where to write report.html, report.md and report.json (default: ./appstore-reconcile-repair-TIMESTAMP).")
    var reportDir: String?

    @Option(help: "Accounts repaired at once.")
    var concurrency = 8

    @Flag(help: "No live progress line.")
    var noProgress = false

    @OptionGroup var options: ConfigurationOptions

    func validate() throws {
        for id in transactionIds where !CustomerRepair.isWellFormedTransactionId(id) {
            throw ValidationError("--transaction-id \(NotATransactionId(text: id).description)")
        }
    }

    func run() async throws {
        try await withExitStatus {
            let choice: ReconciliationRun.AccountChoice = transactionIds.isEmpty ? .ledgerScan : .named(transactionIds: transactionIds)
            let mode: RunMode = dryRun ? .dryRun : .apply
            let directory = reportDir ?? ReportFiles.defaultDirectory(prefix: "appstore-reconcile-repair", dryRun: dryRun)
            // Named transaction IDs belong to one App Store: they need the configuration narrowed to it.
            let deployment = try options.deployment()
            if !transactionIds.isEmpty { _ = try deployment.onlyPair() }
            let layout = RunLayout(deployment)
            let job = RunService.Job.repair(choice, mode: mode, concurrency: concurrency)
            let results = try await deployment.runReconciliations(
                label: "repair", layout: layout, progress: !noProgress, concurrency: RecoveryRunOptions.defaultConcurrentPairs
            ) { _ in job }
            try conclude(results, layout: layout, reportDirectory: directory, dryRun: dryRun, title: "appstore-reconcile repair", summary: \.repairSummaryLine)
        }
    }
}
