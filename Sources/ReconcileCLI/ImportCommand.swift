import ArgumentParser
import Decisions
import Deployment
import Foundation
import Logging
import Reconciliation
import Reports
import SignedData

struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import the Apple accounts an input names: a team's first day, customers older than Apple's 180 days of history.",
        discussion: """
            One value a line (blank lines and # lines ignored), from a file or standard input (-): transaction IDs (any \
            transaction of an account), base64 app receipts (the in-app records' transaction IDs are read; nothing in a \
            receipt is trusted), or order IDs from Apple's emailed receipts (Look Up Order ID; Production only). Each Apple \
            account named, by any of its IDs and any number of times, is imported once and whole: Get All Subscription \
            Statuses and Get Transaction History, every answer verified, written as a repair writes (transactions, \
            subscriptions, accounts and their revisions, the change feed); no notification is invented. A line Apple does \
            not know, a garbled line or receipt, an order Apple calls invalid: reported with its line number, the rest go \
            on (exit 3). Resumable: the checkpoint (app_store.imports) is keyed by the input's content, so the same input \
            started again goes on after the last line finished (from its first line not imported, reported again), \
            without asking Apple again about the accounts imported. \
            In Production, an ID Production does not know (4040010) is asked in the app's Sandbox environment when \
            the configuration file lists it (App Review, TestFlight); a receipt of another app or of Xcode is a line not \
            imported. SIGTERM stops after the accounts in hand (130). Within Apple's rate limits (Retry-After honoured); memory \
            stays flat whatever the input's size. --dry-run writes nothing and reports what it would write.

            \(ExitStatus.summary)
            """
    )

    @Option(name: .customLong("transaction-ids"), help: ArgumentHelp("A file of transaction IDs, one a line (- for standard input).", valueName: "file"))
    var transactionIds: String?

    @Option(name: .customLong("receipts"), help: ArgumentHelp("A file of base64 app receipts, one a line (- for standard input).", valueName: "file"))
    var receipts: String?

    @Option(name: .customLong("order-ids"), help: ArgumentHelp("A file of order IDs, one a line (- for standard input). Production only.", valueName: "file"))
    var orderIds: String?

    @Flag(help: "Ask Apple and compare, write nothing (no checkpoint either), and report what would be written.")
    var dryRun = false

    @Option(help: "Where to write report.html, report.md and report.json (default: ./appstore-reconcile-import-TIMESTAMP).")
    var reportDir: String?

    @Option(help: "Accounts imported at once (Apple's rate limit is shared by them).")
    var concurrency = 8

    @Flag(help: "No live progress line.")
    var noProgress = false

    @OptionGroup var options: ConfigurationOptions

    /// The one input given, and its kind.
    var input: (kind: ImportKind, source: ImportInput.Source)? {
        let given: [(ImportKind, String?)] = [(.transactionIds, transactionIds), (.receipts, receipts), (.orderIds, orderIds)]
        guard let (kind, value) = given.first(where: { $0.1 != nil }), let value else { return nil }
        return (kind, value == "-" ? .standardInput : .file(value))
    }

    func validate() throws {
        let count = [transactionIds, receipts, orderIds].compactMap { $0 }.count
        guard count == 1 else { throw ValidationError("give exactly one of --transaction-ids, --receipts or --order-ids (a file, or - for standard input)") }
        guard concurrency >= 1 else { throw ValidationError("--concurrency must be at least 1") }
    }

    func run() async throws {
        try await withExitStatus {
            guard let (kind, source) = input else { throw ExitCode(ExitStatus.usage) }
            let deployment = try options.deployment()
            let pair = try deployment.onlyPair()
            if kind == .orderIds, pair.pair.environment == .sandbox {
                printError("error: --order-ids: Apple's Look Up Order ID exists in Production only (there is no Sandbox URL); choose --environment Production")
                throw ExitCode(ExitStatus.usage)
            }
            let prepared: ImportInput
            do {
                prepared = try ImportInput.prepare(source, kind: kind)
            } catch {
                printError("error: \(kind.flag): \(error)", level: .error)
                throw ExitCode(ExitStatus.noInput)
            }
            defer { prepared.removeCopy() }
            let mode: RunMode = dryRun ? .dryRun : .apply
            let directory = reportDir ?? ReportFiles.defaultDirectory(prefix: "appstore-reconcile-import", dryRun: dryRun)
            let layout = RunLayout(deployment)
            // What Production does not know is asked in the app's Sandbox environment, when the file lists it.
            let sandbox = try pair.sandboxParts(logger: Logger(label: "appstore-reconcile.import"))
            let job = RunService.Job.importAccounts(prepared, mode: mode, concurrency: concurrency, sandbox: sandbox)
            let results = try await deployment.runReconciliations(
                label: "import", layout: layout, progress: !noProgress, concurrency: RecoveryRunOptions.defaultConcurrentPairs
            ) { _ in job }
            try conclude(results, layout: layout, reportDirectory: directory, dryRun: dryRun, title: "appstore-reconcile import", summary: \.importSummaryLine)
        }
    }
}
