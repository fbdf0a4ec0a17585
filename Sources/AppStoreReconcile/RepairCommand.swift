import AppStoreServerAPI
import ArgumentParser
import Foundation
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

    @Option(help: "Where to write report.md and report.json (default: ./appstore-reconcile-repair-TIMESTAMP).")
    var reportDir: String?

    @Option(help: "Accounts repaired at once.")
    var concurrency = 8

    @Flag(help: "No live progress line.")
    var noProgress = false

    @OptionGroup var options: ConfigurationOptions

    func run() async throws {
        try await withExitStatus {
            let settings = options.settings
            let verifierConfiguration = try settings.verifierConfiguration()
            let apiConfiguration = try settings.apiConfiguration(warn: printError)
            let databaseURL = try settings.databaseURL()
            let logger = Logger(label: "appstore-reconcile.repair")
            let verifier = try SignedDataVerifier(verifierConfiguration)
            let client = AppStoreServerAPIClient(configuration: apiConfiguration, logger: logger)
            let startedAt = Date()
            let repairs = try await LedgerDatabase.withClient(databaseURL, logger: logger) { database in
                let store = LedgerStore(client: database, logger: logger)
                let progress = ProgressLine(enabled: !noProgress, writeLine: { printError($0) })
                let repair = CustomerRepair(client: client, verifier: verifier, store: store, logger: logger, progress: progress, concurrency: concurrency)
                var targets: [CustomerRepair.Target] = []
                if transactionIds.isEmpty {
                    try await repair.scanLedger { targets.append($0) }
                } else {
                    for id in transactionIds {
                        guard CustomerRepair.isWellFormedTransactionId(id) else {
                            throw ValidationError("--transaction-id '\(id.prefix(40))' is not a transaction ID: Apple's are digits only")
                        }
                        let customer = try await store.customer(ofTransaction: id) ?? id
                        targets.append(CustomerRepair.Target(customer: customer, transactionId: id, reasons: [.named]))
                    }
                }
                let chosen = targets
                let results = dryRun
                    ? try await repair.repair(chosen, dryRun: true)
                    : try await RunLock.withLock(databaseURL, store: store, logger: logger) { try await repair.repair(chosen, dryRun: false) }
                progress.finish()
                return results
            }
            var report = RecoveryReport.repairOnly(
                environment: verifierConfiguration.environment.rawValue, dryRun: dryRun, startedAt: startedAt, repairs: repairs
            )
            report.counts.apiRequests = 0
            report.noteRateLimits(client.counts)
            let directory = try ReportFiles.write(report, to: reportDir ?? ReportFiles.defaultDirectory(prefix: "appstore-reconcile-repair", dryRun: dryRun))
            print((dryRun ? "Dry run: " : "Done: ") + "\(report.counts.customersChecked) accounts checked, \(report.counts.customersRepaired) \(dryRun ? "would change" : "changed")"
                + (report.counts.customersFailed > 0 ? ", \(report.counts.customersFailed) failed" : "")
                + ", \(report.counts.subscriptionStatusesRequests) statuses and \(report.counts.transactionHistoryRequests) transaction history requests"
                + (report.counts.rateLimited > 0 ? ", \(report.counts.rateLimited) rate-limited (429) and retried after Retry-After" : ""))
            if report.counts.customersFailed > 0 {
                printError("Apple could not answer for \(report.counts.customersFailed) account(s): see the report")
            }
            print("Report: \(directory)/report.md and \(directory)/report.json")
            if report.hasProblems { throw ExitCode(ExitStatus.doneWithRejections) }
        }
    }
}
