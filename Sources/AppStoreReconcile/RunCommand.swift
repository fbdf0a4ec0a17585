import AppStoreServerAPI
import ArgumentParser
import Foundation
import Ledger
import Logging
import Reconciliation
import SignedData
import Synchronization
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
        _ = try recovery.parsedShard()
        try recovery.validateRate()
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
        try await withExitStatus(logFormat: recovery.logFormat, job: true) {
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

    @Flag(help: "Stop after pass 1: do not repair Apple accounts from Apple's present state (pass 2).")
    var skipRepair = false

    @Option(help: "Accounts repaired at once in pass 2.")
    var repairConcurrency = 8

    @Option(
        help: ArgumentHelp(
            "Run as shard INDEX of COUNT workers (INDEX from 0), e.g. 2/4.",
            discussion: "Pass 1 takes the INDEX-th of COUNT equal parts of the window, pass 2 the customers whose originalTransactionId hashes to INDEX, and each shard uses 1/COUNT of Apple's rate budget. Every shard waits for all shards' pass 1 before its pass 2. In a Kubernetes Indexed Job: --shard $(JOB_COMPLETION_INDEX)/COUNT.",
            valueName: "INDEX/COUNT"
        )
    )
    var shard: String?

    @Option(help: "How long a shard waits for the other shards' pass 1 before its pass 2, in seconds.")
    var shardWait = 1800

    @Option(help: "Multiplies Apple's documented per-endpoint request rates: below 1 leaves room for your live service's own calls to Apple; above 1 only if Apple raised your app's limits.")
    var rateFactor = 1.0

    @Flag(help: "Ignore the checkpoints of an unfinished earlier run of this window and start over.")
    var fresh = false

    @Option(help: "Write the run's metrics here in Prometheus text format when it ends, however it ends (atomically: for a node exporter's textfile collector).")
    var metricsFile: String?

    @Option(help: "Log lines as 'text' or 'json' (one object per line). Default: text on a terminal, json otherwise (APPSTORE_LOG_FORMAT).")
    var logFormat: LogFormat?

    func validateRate() throws {
        guard rateFactor > 0, rateFactor <= 100 else { throw ValidationError("--rate-factor must be above 0 and at most 100") }
    }

    func parsedShard() throws -> Shard {
        guard let shard else { return .whole }
        do { return try Shard(parsing: shard) } catch let error as ShardError { throw ValidationError(error.description) }
    }
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
        let shard = try parsedShard()
        // All shards together stay within Apple's per-app budget.
        apiConfiguration.requestsPerSecond = apiConfiguration.requestsPerSecond.mapValues { shard.share(of: $0 * rateFactor) }
        let databaseURL = try settings.databaseURL()
        let logger = Logger(label: "appstore-reconcile.\(kind)")
        let verifier = try SignedDataVerifier(verifierConfiguration)
        let client = AppStoreServerAPIClient(configuration: apiConfiguration, logger: logger)
        let startedAt = Date()
        let ledgerFigures = LedgerFigures()
        let report: RecoveryReport
        do {
            report = try await LedgerDatabase.withClient(databaseURL, logger: logger) { database in
                let store = LedgerStore(client: database, logger: logger)
                // What the metrics say about the ledger, read as the run ends however it ends.
                do {
                    let report = try await recoverWindow(
                        kind: kind, windowFor: windowFor, environment: verifierConfiguration.environment, shard: shard, client: client,
                        verifier: verifier, store: store, databaseURL: databaseURL, logger: logger
                    )
                    if metricsFile != nil { await ledgerFigures.read(from: store, kind: kind) }
                    return report
                } catch {
                    if metricsFile != nil { await ledgerFigures.read(from: store, kind: kind) }
                    throw error
                }
            }
        } catch {
            let outcome = error is RunStopped || error is CancellationError ? "interrupted" : "failed"
            await writeMetrics(kind: kind, outcome: outcome, shard: shard, startedAt: startedAt, counts: (error as? RunStopped)?.counts, client: client, ledger: ledgerFigures)
            if let error = error as? WindowError {
                printError("error: \(error.description)")
                throw ExitCode(ExitStatus.usage)
            }
            throw error
        }
        await writeMetrics(kind: kind, outcome: report.outcome, shard: shard, startedAt: startedAt, counts: report.counts, client: client, ledger: ledgerFigures)
        let directory = try ReportFiles.write(report, to: reportDir)
        print((dryRun ? "Dry run: " : "Done: ") + report.summaryLine)
        print("Report: \(directory)/report.md and \(directory)/report.json")
        if report.hasProblems {
            printError(
                "finished with problems: \(report.counts.rejected) payload(s) rejected, \(report.counts.retryLater) left for retry, "
                    + "\(report.counts.customersFailed) account(s) Apple could not answer for: see the report"
            )
            throw ExitCode(ExitStatus.doneWithRejections)
        }
    }

    /// Picks the window and recovers it: under the run lock unless dry.
    func recoverWindow(
        kind: String, windowFor: @Sendable (AppStoreEnvironment, LedgerStore) async throws -> OutageWindow, environment: AppStoreEnvironment,
        shard: Shard, client: AppStoreServerAPIClient, verifier: SignedDataVerifier, store: LedgerStore, databaseURL: DatabaseURL, logger: Logger
    ) async throws -> RecoveryReport {
        let window = try await windowFor(environment, store)
        let part = shard.isWhole ? "" : ", shard \(shard) (pass 1: \(shard.subWindow(of: window).start.formatted(.iso8601)) to \(shard.subWindow(of: window).end.formatted(.iso8601)))"
        printError("Recovering \(window.start.formatted(.iso8601)) to \(window.end.formatted(.iso8601)) (\(environment))\(part)\(dryRun ? ", dry run: nothing will be written" : "")")
        // One writing run at a time (per shard); a dry run writes nothing and needs no lock.
        if dryRun { return try await recover(kind: kind, client: client, verifier: verifier, store: store, window: window, shard: shard, logger: logger) }
        return try await RunLock.withLock(databaseURL, store: store, logger: logger, shardIndex: shard.isWhole ? nil : shard.index) {
            // Runs of this shard still recorded as running died: the lock is ours.
            let abandoned = try await store.abandonDeadRuns(shard: shard.isWhole ? nil : shard.description)
            if abandoned > 0 { printError("\(abandoned) earlier run(s) recorded as running had died; marked abandoned") }
            return try await recover(kind: kind, client: client, verifier: verifier, store: store, window: window, shard: shard, logger: logger)
        }
    }

    /// Pass 1, then pass 2 unless skipped.
    func recover(
        kind: String, client: AppStoreServerAPIClient, verifier: SignedDataVerifier, store: LedgerStore, window: OutageWindow, shard: Shard,
        logger: Logger
    ) async throws -> RecoveryReport {
        let progress = ProgressLine(enabled: !noProgress, writeLine: { printError($0) })
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
            : try await store.startRun(
                kind: kind, environment: verifier.configuration.environment.rawValue, windowStart: window.start, windowEnd: window.end,
                shard: shard.isWhole ? nil : shard.description
            )
        do {
            let recovery = NotificationRecovery(client: client, verifier: verifier, store: store, logger: logger, progress: progress, stop: stop)
            if fresh, !dryRun {
                try await store.clearCheckpoints(in: NotificationRecovery.Options(window: window, onlyFailures: onlyFailures, shard: shard).checkpointScope(verifier.configuration.environment), keepingPassOne: false)
            }
            let options = NotificationRecovery.Options(window: window, dryRun: dryRun, onlyFailures: onlyFailures, runId: runId, shard: shard)
            var report = try await recovery.run(options)
            if let resumed = report.run.resumed {
                printError(
                    "Resumed an unfinished run: \(resumed.notificationsHandledBefore) notification(s) it had handled were not fetched again"
                        + (resumed.passOneDoneBefore ? "; its pass 1 was complete" : "")
                )
            }
            if !skipRepair {
                if !shard.isWhole, !dryRun { try await waitForOtherShards(shard, window: window, environment: verifier.configuration.environment.rawValue, store: store, stop: stop) }
                let repair = CustomerRepair(
                    client: client, verifier: verifier, store: store, logger: logger, progress: progress, concurrency: repairConcurrency,
                    stop: stop
                )
                let passTwoStarted = Date()
                let repairs = try await repair.afterRecovery(report, window: window, dryRun: dryRun, shard: shard)
                report.add(repairs: repairs, seconds: Date().timeIntervalSince(passTwoStarted), finishedAt: Date().formatted(.iso8601))
                progress.finish()
            }
            report.noteRateLimits(client.counts)
            if let runId {
                try await store.finishRun(runId, outcome: report.outcome, countsJSON: report.countsJSON)
                try await store.clearCheckpoints(in: options.checkpointScope(verifier.configuration.environment), keepingPassOne: true)
            }
            return report
        } catch {
            progress.finish()
            if let runId {
                let counts = (error as? RunStopped)?.counts.map(RecoveryReport.countsJSON) ?? "{}"
                try? await store.finishRun(runId, outcome: error is CancellationError || error is RunStopped ? "interrupted" : "failed", countsJSON: counts)
            }
            throw error
        }
    }
}

extension RecoveryRunOptions {
    /// Pass 2 of a shard repairs customers that any shard's pass 1 may have recovered: it waits
    /// until every shard of the window has recorded its pass 1 done (or `--shard-wait` passes).
    func waitForOtherShards(_ shard: Shard, window: OutageWindow, environment: String, store: LedgerStore, stop: StopRequest) async throws {
        let all = Set((0..<shard.count).map { "\($0)/\(shard.count)" })
        let deadline = ContinuousClock.now + .seconds(shardWait)
        var announced = false
        while true {
            let done = try await store.shardsWithPassOneDone(
                environment: environment, windowStart: window.start, windowEnd: window.end, onlyFailures: onlyFailures
            )
            let waiting = all.subtracting(done).sorted()
            if waiting.isEmpty { return }
            if ContinuousClock.now >= deadline {
                printError("warning: shards \(waiting.joined(separator: ", ")) have not finished pass 1 after \(shardWait) s; repairing without them (a later run catches up)")
                return
            }
            if !announced {
                printError("waiting for shards \(waiting.joined(separator: ", ")) to finish pass 1 before pass 2")
                announced = true
            }
            try stop.check()
            try await Task.sleep(for: .seconds(1))
        }
    }
}

extension RecoveryRunOptions {
    /// Writes `--metrics-file`, if asked for; a failure to write is a warning, never the run's fate.
    func writeMetrics(
        kind: String, outcome: String, shard: Shard, startedAt: Date, counts: RecoveryReport.Counts?, client: AppStoreServerAPIClient,
        ledger: LedgerFigures
    ) async {
        guard let metricsFile else { return }
        let figures = ledger.value
        let metrics = RunMetrics(
            kind: kind, outcome: outcome, dryRun: dryRun, shard: shard.isWhole ? nil : shard.description, startedAt: startedAt,
            finishedAt: Date(), counts: counts, api: client.counts, runsByOutcome: figures.runs, lastSuccess: figures.lastSuccess
        )
        do {
            try metrics.write(to: metricsFile)
        } catch {
            printError("warning: could not write the metrics file \(metricsFile): \(error)")
        }
    }
}

/// The ledger's side of the metrics, read once as a run ends.
final class LedgerFigures: Sendable {
    private let state = Mutex<(runs: [String: Int]?, lastSuccess: Date?)>((nil, nil))

    var value: (runs: [String: Int]?, lastSuccess: Date?) { state.withLock { $0 } }

    /// Reads without throwing: the database may be why the run ended.
    func read(from store: LedgerStore, kind: String) async {
        let runs = try? await store.runsByOutcome()
        let last = try? await store.lastSuccessfulRun(kind: kind)?.finishedAt
        state.withLock { $0 = (runs, last) }
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
        try report.writeFiles(to: path)
        return path
    }
}
