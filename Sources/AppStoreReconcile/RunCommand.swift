import AppStoreServerAPI
import ArgumentParser
import Foundation
import Ledger
import Logging
import Reconciliation
import SignedData
import UnixSignals

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Recover an outage window: apply to the ledger exactly the notifications it missed.",
        discussion: """
            Pages Apple's Get Notification History for [--start, --end): first DID_RENEW and EXPIRED, one query \
            per subtype (a type filter without a subtype returns only notifications without one), then every \
            other notification once. Verifies every signed payload, compares notificationUUID and signedDate with \
            the ledger a page at a time, and applies only what was missed, one database transaction per page. A \
            notification signed earlier never overwrites a subscription's state from one signed later.

            Then pass 2 (unless --skip-repair): every customer whose record may still be wrong (touched by a \
            recovered notification, named in a rejected payload, or contradicting itself in the ledger) gets the \
            truth from Get Transaction History, starting at the stored revision, and Get All Subscription Statuses.

            Run it first with --dry-run: it writes nothing and reports what would change. Every run writes \
            report.md (for people) and report.json (for scripts) to --report-dir and prints a summary.

            Needs every setting: APPSTORE_ISSUER_ID, APPSTORE_KEY_ID, APPSTORE_PRIVATE_KEY, APPSTORE_BUNDLE_ID, \
            APPSTORE_APP_APPLE_ID (Production), APPSTORE_ENVIRONMENT, APPSTORE_ROOT_CERTIFICATES, DATABASE_URL.

            \(ExitStatus.summary)
            """
    )

    @Option(help: "Start of the window: ISO 8601 with an offset (2026-11-18T02:00:00Z) or UNIX milliseconds.")
    var start: String

    @Option(help: "End of the window (exclusive), same forms; a future time means now.")
    var end: String

    @OptionGroup var recovery: RecoveryRunOptions

    @OptionGroup var options: ConfigurationOptions

    func validate() throws {
        do {
            let startTime = try OutageWindow.parseTime(start)
            let endTime = try OutageWindow.parseTime(end)
            guard startTime < endTime else {
                throw ValidationError(startTime == endTime ? "the window is empty: --start equals --end" : "--start must be before --end")
            }
        } catch let error as WindowError {
            throw ValidationError(error.description)
        }
    }

    func run() async throws {
        try await withExitStatus {
            try await recovery.execute(kind: "run", configuration: options) { environment, _ in
                try OutageWindow(start: try OutageWindow.parseTime(start), end: try OutageWindow.parseTime(end), environment: environment)
            }
        }
    }
}

/// The flags every recovering command shares (`run`, `nightly`).
struct RecoveryRunOptions: ParsableArguments {
    @Flag(help: "Fetch, verify and compare, write nothing, and report what a real run would apply.")
    var dryRun = false

    @Option(help: "Where to write report.md and report.json (default: ./appstore-reconcile-report-TIMESTAMP).")
    var reportDir: String?

    @Flag(help: "Ask Apple only for notifications it never delivered (fewer pages; cannot see ones delivered and then lost by the server).")
    var onlyFailures = false

    @Flag(help: "No live progress line.")
    var noProgress = false

    @Option(help: "How many times a request to Apple is tried before the run gives up with exit code 75.")
    var retryAttempts = 6

    @Flag(help: "Stop after pass 1: do not repair customers through Get Transaction History.")
    var skipRepair = false

    @Option(help: "Customers repaired at once in pass 2.")
    var repairConcurrency = 8

}

extension RecoveryRunOptions {
    /// Recovers the window `windowFor` picks (pass 1, then pass 2 unless skipped), under the run
    /// lock unless dry, writes the report, and maps the outcome to the exit code.
    func execute(
        kind: String, configuration: ConfigurationOptions,
        windowFor: @escaping @Sendable (AppStoreEnvironment, LedgerStore) async throws -> OutageWindow
    ) async throws {
        let settings = configuration.settings
        let verifierConfiguration = try settings.verifierConfiguration()
        var apiConfiguration = try settings.apiConfiguration(warn: printError)
        apiConfiguration.retryPolicy.maximumAttempts = max(1, retryAttempts)
        let databaseURL = try settings.databaseURL()
        let logger = Logger(label: "appstore-reconcile.\(kind)")
        let verifier = try SignedDataVerifier(verifierConfiguration)
        let client = AppStoreServerAPIClient(configuration: apiConfiguration, logger: logger)
        let report: RecoveryReport
        do {
            report = try await LedgerDatabase.withClient(databaseURL, logger: logger) { database in
                let store = LedgerStore(client: database, logger: logger)
                let window = try await windowFor(verifierConfiguration.environment, store)
                printError("Recovering \(window.start.formatted(.iso8601)) to \(window.end.formatted(.iso8601)) (\(verifierConfiguration.environment))\(dryRun ? ", dry run: nothing will be written" : "")")
                // One writing run at a time; a dry run writes nothing and needs no lock.
                if dryRun { return try await recover(kind: kind, client: client, verifier: verifier, store: store, window: window, logger: logger) }
                return try await RunLock.withLock(databaseURL, store: store, logger: logger) {
                    try await recover(kind: kind, client: client, verifier: verifier, store: store, window: window, logger: logger)
                }
            }
        } catch let error as WindowError {
            printError("error: \(error.description)")
            throw ExitCode(ExitStatus.usage)
        }
        let directory = try ReportFiles.write(report, to: reportDir)
        print((dryRun ? "Dry run: " : "Done: ") + report.summaryLine)
        print("Report: \(directory)/report.md and \(directory)/report.json")
        if report.counts.rejected + report.counts.retryLater > 0 {
            printError("\(report.counts.rejected) payload(s) rejected and \(report.counts.retryLater) left for retry: see the report")
            throw ExitCode(ExitStatus.doneWithRejections)
        }
    }

    /// Pass 1, then pass 2 unless skipped.
    func recover(
        kind: String, client: AppStoreServerAPIClient, verifier: SignedDataVerifier, store: LedgerStore, window: OutageWindow, logger: Logger
    ) async throws -> RecoveryReport {
        let progress = ProgressLine(enabled: !noProgress)
        let stop = StopRequest()
        // SIGTERM (cron, systemd, Kubernetes) or SIGINT (a terminal): finish the batch in hand,
        // commit it, record the run as interrupted, and exit.
        let signals = Task {
            for await _ in await UnixSignalsSequence(trapping: .sigterm, .sigint) {
                printError("stopping: finishing the batch in hand…")
                stop.request()
            }
        }
        defer { signals.cancel() }
        // Both passes are one run: one row in app_store.runs, finished when both are done.
        let runId = dryRun
            ? nil
            : try await store.startRun(kind: kind, environment: verifier.configuration.environment.rawValue, windowStart: window.start, windowEnd: window.end)
        do {
            let recovery = NotificationRecovery(client: client, verifier: verifier, store: store, logger: logger, progress: progress, stop: stop)
            var report = try await recovery.run(.init(window: window, dryRun: dryRun, onlyFailures: onlyFailures, runId: runId))
            if !skipRepair {
                let repair = CustomerRepair(
                    client: client, verifier: verifier, store: store, logger: logger, progress: progress, concurrency: repairConcurrency,
                    stop: stop
                )
                report.add(repairs: try await repair.afterRecovery(report, window: window, dryRun: dryRun))
                progress.finish()
            }
            if let runId { try await store.finishRun(runId, outcome: report.outcome, countsJSON: report.countsJSON) }
            return report
        } catch {
            progress.finish()
            if let runId {
                try? await store.finishRun(runId, outcome: error is CancellationError || error is RunStopped ? "interrupted" : "failed", countsJSON: "{}")
            }
            throw error
        }
    }
}

/// Writes a report's two files.
enum ReportFiles {
    static func defaultDirectory(prefix: String, dryRun: Bool) -> String {
        let stamp = Date().formatted(Date.ISO8601FormatStyle().year().month().day().dateSeparator(.omitted).time(includingFractionalSeconds: false).timeSeparator(.omitted))
        return "\(prefix)-\(stamp)\(dryRun ? "-dry-run" : "")"
    }

    static func write(_ report: RecoveryReport, to directory: String?) throws -> String {
        let path = directory ?? defaultDirectory(prefix: "appstore-reconcile-report", dryRun: report.isDryRun)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try report.markdown().write(toFile: path + "/report.md", atomically: true, encoding: .utf8)
        try report.json().write(to: URL(fileURLWithPath: path + "/report.json"))
        return path
    }
}
