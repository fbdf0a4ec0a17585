import AppStoreServerAPI
import ArgumentParser
import Decisions
import Foundation
import Ledger
import Logging
import Reconciliation
import SignedData

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
            report.html (to open in a browser), report.md (text) and report.json (for scripts) to --report-dir and \
            prints a summary.

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
        _ = try recovery.deliveryTarget()
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
            let window = ReconciliationRun.WindowChoice.fixed(start: try OutageWindow.parseTime(start), end: try OutageWindow.parseTime(end))
            try await recovery.execute(try recovery.request(kind: .run, window: window), configuration: options)
        }
    }
}

/// The flags every recovering command shares (`run`, `nightly`).
struct RecoveryRunOptions: ParsableArguments {
    @Flag(help: "Fetch, verify and compare, write nothing, and report what a real run would apply.")
    var dryRun = false

    @Option(help: "Where to write report.html, report.md and report.json (default: ./appstore-reconcile-report-TIMESTAMP).")
    var reportDir: String?

    @Flag(help: "Ask Apple only for notifications it never delivered (fewer pages; cannot see ones delivered and then lost by the server).")
    var onlyFailures = false

    @Flag(help: "No live progress line.")
    var noProgress = false

    @Option(help: "How many times a request to Apple is tried before the run gives up with exit code 75.")
    var retryAttempts = 6

    @Option(
        help: """
            Apple enforces its rate limits per hour: while the waits Apple's 429s ask of a request (Retry-After) add up to no more \
            than this many minutes, the run waits and goes on; beyond, it stops with exit code 75 and prints when to resume (what \
            it committed stays).
            """
    )
    var rateLimitWaitMinutes = 60.0

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

    @Option(
        help: ArgumentHelp(
            "POST every notification the run recovers to your own webhook handler, as Apple would have (APPSTORE_DELIVER_TO).",
            discussion: "Each recovered notification's original body {\"signedPayload\":\"…\"} (Content-Type: application/json), in signedDate order, after both passes. A 2xx marks it delivered, never sent again; anything else (redirects are not followed) is retried in later rounds of the run and otherwise stays pending for the next run or `deliver --to URL` (exit code 3). Your handler must dedupe by notificationUUID, as it must for Apple. https, or plain http only to a loopback address; no user or password in the URL: give a credential with --deliver-header (logs and the report show only the URL's scheme and host). A notification refused 12 times is parked as failed (deliver --list, deliver --retry-failed). A dry run lists what it would deliver and sends nothing.",
            valueName: "url"
        )
    )
    var deliverTo: String?

    @Option(help: ArgumentHelp(DeliveryHeaderOption.help, valueName: "'Name: value'"))
    var deliverHeader: [String] = []

    func validateRate() throws {
        guard rateLimitWaitMinutes >= 0 else { throw ValidationError("--rate-limit-wait-minutes must not be negative") }
        guard rateFactor > 0, rateFactor <= 100 else { throw ValidationError("--rate-factor must be above 0 and at most 100") }
    }

    /// `--deliver-to`, else `APPSTORE_DELIVER_TO`, checked.
    func deliveryTarget(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> DeliveryTarget? {
        guard let text = deliverTo ?? environment["APPSTORE_DELIVER_TO"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            guard deliverHeader.isEmpty else { throw ValidationError("--deliver-header needs --deliver-to") }
            return nil
        }
        let headers = try DeliveryHeaderOption.parse(deliverHeader, option: "--deliver-header", environment: environment)
        do { return try DeliveryTarget(text, headers: headers) } catch let error as DeliveryTargetError { throw ValidationError("--deliver-to \(error.description)") }
    }

    func parsedShard() throws -> Shard {
        guard let shard else { return .whole }
        do { return try Shard(parsing: shard) } catch let error as ShardError { throw ValidationError(error.description) }
    }
}

extension RecoveryRunOptions {
    /// The request these flags describe.
    func request(kind: RunKind, window: ReconciliationRun.WindowChoice) throws -> ReconciliationRun.Request {
        ReconciliationRun.Request(
            kind: kind, window: window, mode: dryRun ? .dryRun : .apply, onlyFailures: onlyFailures, repair: !skipRepair,
            repairConcurrency: repairConcurrency, shard: try parsedShard(), shardWait: .seconds(shardWait), fresh: fresh, metricsFile: metricsFile,
            deliverTo: try deliveryTarget()
        )
    }

    /// Runs the request with the configuration's client, verifier and ledger, SIGTERM and
    /// SIGINT stopping it gracefully; writes the report, prints the summary, and maps the
    /// outcome to the exit code.
    func execute(_ request: ReconciliationRun.Request, configuration: ConfigurationOptions) async throws {
        let result = try await withReconciliationRun(
            configuration.settings, label: request.kind.rawValue, progress: !noProgress,
            adjust: {
                $0.forRun(shard: request.shard, rateFactor: rateFactor, retryAttempts: retryAttempts, rateLimitWait: .seconds(rateLimitWaitMinutes * 60))
            }
        ) { run in
            try await run.execute(request)
        }
        try conclude(result, reportDirectory: reportDir, summary: \.summaryLine)
    }
}

extension ReconciliationRun.Event {
    /// The line the operator reads.
    var message: String {
        switch self {
        case .recovering(let window, let environment, let passOne, let shard, let dryRun):
            let part = passOne.map { ", shard \(shard) (pass 1: \($0.start.formatted(.iso8601)) to \($0.end.formatted(.iso8601)))" } ?? ""
            return "Recovering \(window.start.formatted(.iso8601)) to \(window.end.formatted(.iso8601)) (\(environment))\(part)"
                + (dryRun ? ", dry run: nothing will be written" : "")
        case .resumingUnfinishedNightlyWindow:
            return "An unfinished nightly run of this window left checkpoints: resuming its window"
        case .abandonedDeadRuns(let count):
            return "\(count) earlier run(s) recorded as running had died; marked abandoned"
        case .resumed(let resumed):
            return "Resumed an unfinished run: \(resumed.notificationsHandledBefore) notification(s) it had handled were not fetched again"
                + (resumed.passOneDoneBefore ? "; its pass 1 was complete" : "")
        case .waitingForShards(let shards):
            return "waiting for shards \(shards.joined(separator: ", ")) to finish pass 1 before pass 2"
        case .shardWaitExpired(let shards, let waited):
            return "warning: shards \(shards.joined(separator: ", ")) have not finished pass 1 after \(waited.components.seconds) s; repairing without them (a later run catches up)"
        case .redelivering(let target, let pending):
            return "Re-delivering \(pending) notification(s) to \(target), in signedDate order"
        case .redeliveryBusy(let target):
            return "warning: another process is delivering to \(target); what this run recorded stays pending for it (or the next run, or deliver --to)"
        case .metricsNotWritten(let path, let error):
            return "warning: could not write the metrics file \(path): \(error)"
        }
    }
}
