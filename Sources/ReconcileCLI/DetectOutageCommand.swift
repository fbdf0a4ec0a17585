import AppStoreServerAPI
import ArgumentParser
import Decisions
import Foundation
import Reports
import Logging
import Reconciliation
import SignedData

struct DetectOutageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "detect-outage",
        abstract: "Find when your server missed notifications, and the run command that recovers each outage.",
        discussion: """
            Pages Get Notification History with onlyFailures over the last --since (7d, 36h, 90m, or an ISO 8601 \
            time): the notifications Apple has not yet delivered. Groups their first delivery attempts into \
            outages (a new one after --gap without a failure), with how many failed with each sendAttemptResult \
            (NO_RESPONSE, TIMED_OUT, TLS_ISSUE, ...), and prints the `run` command line that recovers each, with a \
            margin of ten minutes either side.

            A notification Apple delivered on a later retry drops out of onlyFailures: an outage Apple's retries \
            covered shows only what they never delivered. Reads no payload and writes nothing to the database. \
            Writes report.html (a chart of the period with each outage shaded), report.md and report.json into \
            --report-dir. Needs the API settings (APPSTORE_ISSUER_ID, APPSTORE_KEY_ID, APPSTORE_PRIVATE_KEY, APPSTORE_BUNDLE_ID, \
            APPSTORE_ENVIRONMENT, or a configuration file), not the database.

            With a configuration file: every pair it lists (--app and --environment narrow them), four at once, each \
            line and `run` command naming its pair, --json a list (with bundleId), reports in DIR/<bundleId>/<environment>/; \
            one pair's failure is that pair's, and the exit code the most serious.

            \(ExitStatus.summary)
            """
    )

    @Option(
        help: "How far back to look: 7d, 36h, 90m, or an ISO 8601 time. At most what history keeps (180 days, 30 in Sandbox). (default: 7d)",
        transform: SinceArgument.argument
    )
    var since: SinceArgument = .ago(7 * 86_400)

    @Option(
        help: "A quiet stretch this long (30m, 2h) ends an outage. Small apps send few notifications: raise it if one outage shows as several. (default: 1h)",
        transform: OutageDetection.durationArgument
    )
    var gap: TimeInterval = 3_600

    @Flag(help: "Print JSON instead of text.")
    var json = false

    @Option(help: "Where to write report.html, report.md and report.json (default: appstore-reconcile-outages-<time> in the working directory).")
    var reportDir: String?

    @OptionGroup var options: ConfigurationOptions

    struct Output: Codable {
        /// Set when several pairs were scanned.
        var bundleId: String?
        var scannedFrom: Date
        var scannedTo: Date
        var environment: String
        var undelivered: Int
        var requests: Int
        var outages: [Outage]
    }

    struct Outage: Codable {
        var detected: OutageDetection.DetectedOutage
        var command: String
    }

    func run() async throws {
        try await withExitStatus {
            let pairs = try options.pairs()
            let several = pairs.count > 1
            let now = Date()
            let directory = reportDir ?? ReportFiles.defaultDirectory(prefix: "appstore-reconcile-outages", dryRun: false, now: now)
            let scans = try await Self.scan(pairs, since: since.instant(now: now), gap: gap, now: now, progress: !several && !json)
            var outputs: [Output] = []
            var statuses: [Int32] = []
            for (pair, result) in scans {
                let prefix = several ? "\(pair): " : ""
                let scanned: OutageScan.Result
                switch result {
                case .success(let found): scanned = found
                case .failure(let error):
                    guard several else { throw error }
                    let failure = FailureReport(error)
                    printError(prefix + failure.line, level: failure.level)
                    statuses.append(ExitStatus.of(failure.kind))
                    continue
                }
                statuses.append(ExitStatus.success)
                if let start = scanned.clampedTo {
                    printError("\(prefix)note: \(scanned.environment.rawValue) history keeps \(OutageWindow.retentionDays(scanned.environment)) days; scanning from \(start.formatted(.iso8601))")
                }
                let output = Output(
                    bundleId: several ? pair.bundleId : nil, scannedFrom: scanned.window.start, scannedTo: scanned.window.end,
                    environment: scanned.environment.rawValue, undelivered: scanned.undelivered, requests: scanned.requests,
                    outages: scanned.outages.map { Outage(detected: $0, command: Self.command(for: $0, pair: several ? pair : nil)) }
                )
                outputs.append(output)
                var lines: [String] = []
                Self.text(output) { lines.append($0) }
                if !json { lines.forEach { print(prefix + $0) } }
                Self.writeReports(output, scanned, lines: lines, to: several ? "\(directory)/\(pair.path)" : directory, prefix: prefix)
            }
            if json { print(several ? try Self.json(outputs) : try Self.json(outputs[0]), terminator: "") }
            let status = ExitStatus.mostSerious(statuses)
            if status != ExitStatus.success { throw ExitCode(status) }
        }
    }

    static func json(_ output: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return String(decoding: try encoder.encode(output), as: UTF8.self) + "\n"
    }

    static func text(_ output: Output, _ print: (String) -> Void) {
        print(
            "Scanned \(output.scannedFrom.formatted(.iso8601)) to \(output.scannedTo.formatted(.iso8601)) (\(output.environment), onlyFailures): "
                + "\(output.undelivered) notification(s) not delivered, \(output.requests) request(s)."
        )
        if output.outages.isEmpty {
            print(output.undelivered == 0 ? "No outage: Apple delivered every notification of the period." : "No failed first attempt recorded.")
        }
        for (index, outage) in output.outages.map(\.detected).enumerated() {
            let results = outage.byResult.sorted { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }.map { "\($0.key) \($0.value)" }
            print(
                "Outage \(index + 1): first failed attempt \(outage.firstFailure.formatted(.iso8601)), last \(outage.lastFailure.formatted(.iso8601)) "
                    + "(\(Self.duration(outage.lastFailure.timeIntervalSince(outage.firstFailure)))): \(outage.notifications) notification(s); "
                    + results.joined(separator: ", ")
            )
            print("  recover: \(Self.command(for: outage))")
        }
    }

    /// The run that recovers `outage`; with several pairs, narrowed to `pair`'s.
    static func command(for outage: OutageDetection.DetectedOutage, pair: AppStorePair? = nil) -> String {
        let narrowed = pair.map { " --app \($0.bundleId) --environment \($0.environment.rawValue)" } ?? ""
        return "appstore-reconcile run\(narrowed) --start \(outage.recoveryStart.formatted(.iso8601)) --end \(outage.recoveryEnd.formatted(.iso8601)) --dry-run"
    }

    static func duration(_ seconds: TimeInterval) -> String {
        let minutes = Int(seconds / 60)
        return minutes >= 60 ? "\(minutes / 60) h \(minutes % 60) min" : "\(minutes) min"
    }
}
