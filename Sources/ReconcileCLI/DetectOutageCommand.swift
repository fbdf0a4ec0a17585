import AppStoreServerAPI
import ArgumentParser
import Decisions
import Foundation
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
            APPSTORE_ENVIRONMENT), not the database.

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
            let configuration = try options.settings.apiConfiguration(warn: { printError($0, level: .warning) })
            let client = AppStoreServerAPIClient(configuration: configuration, logger: Logger(label: "appstore-reconcile.detect-outage"))
            let now = Date()
            let scan = OutageScan(client: client, progress: ProgressLine(enabled: true, writeLine: { printError($0) }))
            let result = try await scan.scan(since: since.instant(now: now), gap: gap, now: now)
            if let start = result.clampedTo {
                let days = OutageWindow.retentionDays(result.environment)
                printError("note: \(result.environment.rawValue) history keeps \(days) days; scanning from \(start.formatted(.iso8601))")
            }
            let output = Output(
                scannedFrom: result.window.start, scannedTo: result.window.end, environment: result.environment.rawValue,
                undelivered: result.undelivered, requests: result.requests,
                outages: result.outages.map { Outage(detected: $0, command: Self.command(for: $0)) }
            )
            let jsonText = try Self.json(output)
            var lines: [String] = []
            Self.text(output) { lines.append($0) }
            json ? print(jsonText, terminator: "") : lines.forEach { print($0) }
            // The outages are printed above; reports that cannot be written are a warning, not a
            // failed scan (a read-only working directory, say).
            let directory = reportDir ?? ReportFiles.defaultDirectory(prefix: "appstore-reconcile-outages", dryRun: false, now: now)
            do {
                try ReportFiles.write(
                    [
                        "report.md": "# Outages\n\n" + lines.map { $0.hasPrefix("  ") ? "    " + $0.dropFirst(2) : $0 + "\n" }.joined(separator: "\n") + "\n",
                        "report.json": jsonText,
                        "report.html": OutageReportPage.html(result, commands: output.outages.map(\.command)),
                    ],
                    to: directory
                )
            } catch {
                printError("warning: the reports were not written to \(directory): \(error); the outages above are complete", level: .warning)
                return
            }
            printError("Reports: \(directory)/report.html (chart), report.md, report.json")
        }
    }

    static func json(_ output: Output) throws -> String {
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

    static func command(for outage: OutageDetection.DetectedOutage) -> String {
        "appstore-reconcile run --start \(outage.recoveryStart.formatted(.iso8601)) --end \(outage.recoveryEnd.formatted(.iso8601)) --dry-run"
    }

    static func duration(_ seconds: TimeInterval) -> String {
        let minutes = Int(seconds / 60)
        return minutes >= 60 ? "\(minutes / 60) h \(minutes % 60) min" : "\(minutes) min"
    }
}
