import AppStoreServerAPI
import ArgumentParser
import Decisions
import Deployment
import Foundation
import Ledger
import Logging
import Reconciliation
import SignedData

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

    @Option(help: "With several apps or environments configured: how many of them are recovered at once, each within its own rate budget.")
    var concurrentPairs = Self.defaultConcurrentPairs

    /// Pairs recovered at once unless --concurrent-pairs says otherwise.
    static let defaultConcurrentPairs = 4

    @Flag(help: "Stop after pass 1: do not repair Apple accounts from Apple's present state (pass 2).")
    var skipRepair = false

    @Option(help: "Accounts repaired at once in pass 2.")
    var repairConcurrency = 8

    @Option(
        help: ArgumentHelp(
            "Run as shard INDEX of COUNT workers (INDEX from 0), e.g. 2/4.",
            discussion: "Pass 1 takes the INDEX-th of COUNT equal parts of the window, pass 2 the customers whose originalTransactionId hashes to INDEX, and each shard uses 1/COUNT of Apple's rate budget. Every shard waits for all shards' pass 1 before its pass 2. In a Kubernetes Indexed Job: --shard $(JOB_COMPLETION_INDEX)/COUNT.",
            valueName: "INDEX/COUNT"
        ),
        transform: Shard.argument
    )
    var shard: Shard?

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
    var deliverTo: DeliveryURLArgument?

    @Option(help: ArgumentHelp(DeliveryHeaderArgument.help, valueName: "'Name: value'"))
    var deliverHeader: [DeliveryHeaderArgument] = []

    /// Checked once for every command that takes these flags; `--deliver-to` (else
    /// `APPSTORE_DELIVER_TO`) is left holding the target with its headers.
    mutating func validate() throws {
        guard rateLimitWaitMinutes >= 0 else { throw ValidationError("--rate-limit-wait-minutes must not be negative") }
        guard rateFactor > 0, rateFactor <= 100 else { throw ValidationError("--rate-factor must be above 0 and at most 100") }
        guard retryAttempts >= 1, repairConcurrency >= 1, concurrentPairs >= 1, shardWait >= 0 else {
            throw ValidationError("--retry-attempts, --repair-concurrency and --concurrent-pairs must be at least 1, --shard-wait not negative")
        }
        try DeliveryOption.resolve(&deliverTo, headers: deliverHeader, urlOption: "--deliver-to", headerOption: "--deliver-header", variable: "APPSTORE_DELIVER_TO")
    }
}

extension RecoveryRunOptions {
    /// The request these flags describe.
    func request(kind: RunKind, window: ReconciliationRun.WindowChoice) -> ReconciliationRun.Request {
        ReconciliationRun.Request(
            kind: kind, window: window, mode: dryRun ? .dryRun : .apply, onlyFailures: onlyFailures, repair: !skipRepair,
            repairConcurrency: repairConcurrency, shard: shard ?? .whole, shardWait: .seconds(shardWait), fresh: fresh, metricsFile: metricsFile,
            deliverTo: deliverTo?.target
        )
    }

    /// Runs the request for every (app, environment) pair the configuration selects, up to
    /// --concurrent-pairs at once, SIGTERM and SIGINT stopping it gracefully; writes the reports,
    /// prints the summary, and maps the outcome to the exit code (`conclude`, as `RunLayout` shows
    /// one pair or several).
    ///
    /// `answering`: answer each pair's open refund requests from its facts query, each query
    /// run under this timeout (`consumption-requests --answer`); a pair without facts is told
    /// and only recorded, no pair with facts is a configuration error.
    /// `auditSample`: a nightly's audit sample in place of the configuration's.
    func execute(_ request: ReconciliationRun.Request, configuration: ConfigurationOptions, answering: Duration? = nil, auditSample: Int? = nil) async throws {
        let deployment = try configuration.deployment()
        let layout = RunLayout(deployment)
        if let answering {
            let without = deployment.pairs.filter { $0.refundFacts == nil }
            guard without.count < deployment.pairs.count else {
                throw ConfigurationError(
                    setting: "--answer", problem: "needs an app with refundRequests.facts in the configuration file (--config); \(without.map(\.pair.description).joined(separator: ", ")) has none"
                )
            }
            for pair in without {
                printError("\(pair.pair): no refundRequests.facts in the configuration: its refund requests are recorded, not answered", level: .warning)
            }
            try await deployment.checkRefundFacts(timeout: answering, logger: Logger(label: "appstore-reconcile.\(request.kind.rawValue)"))
        }
        let adjust = { (api: AppStoreServerAPIConfiguration) in
            api.forRun(shard: request.shard, rateFactor: rateFactor, retryAttempts: retryAttempts, rateLimitWait: .seconds(rateLimitWaitMinutes * 60))
        }
        let results = try await deployment.runReconciliations(
            label: request.kind.rawValue, layout: layout, progress: !noProgress, concurrency: concurrentPairs, adjust: adjust
        ) { pair in
            var request = try self.request(request, for: pair, layout: layout)
            if let timeout = answering { request.answering = pair.refundFacts.map { RefundAnswering.Settings(query: $0, timeout: timeout) } }
            if request.kind == .nightly {
                var audit = pair.audit
                if let auditSample { audit.sample = auditSample }
                request.audit = audit
            }
            return .recovery(request)
        }
        try conclude(results, layout: layout, reportDirectory: reportDir, dryRun: dryRun, title: "appstore-reconcile \(request.kind.rawValue)", summary: \.summaryLine)
    }

    /// The request for one pair: the configuration file's `deliverTo` for it when neither
    /// --deliver-to nor APPSTORE_DELIVER_TO gave a handler.
    func request(_ request: ReconciliationRun.Request, for pair: Deployment.Pair, layout: RunLayout) throws -> ReconciliationRun.Request {
        var request = request
        // Several pairs: a metrics file each (`NAME-<bundleId>-<environment>.prom`): a run rewrites
        // its file, and each pair's run ends on its own (its series carry its bundle_id and environment).
        if let file = request.metricsFile, case .sideBySide = layout {
            let url = URL(fileURLWithPath: file)
            let name = url.deletingPathExtension().lastPathComponent + "-\(pair.pair.bundleId)-\(pair.pair.environment.rawValue)"
            request.metricsFile = url.deletingLastPathComponent().appendingPathComponent(name).appendingPathExtension(url.pathExtension.isEmpty ? "prom" : url.pathExtension).path
        }
        request.deliverTo = try pair.deliveryTarget(given: request.deliverTo, headers: deliverHeader)
        return request
    }
}
