import AppStoreServerAPI
import Foundation
import Logging
import Reconciliation
import SignedData

/// `detect-outage` over several (app, environment) pairs: the scans side by side, and each one's reports.
extension DetectOutageCommand {
    /// Each pair's scan, up to four at once, each with its own client; in the pairs' order.
    static func scan(
        _ pairs: [ConfigurationOptions.Pair], since: Date, gap: TimeInterval, now: Date, progress: Bool
    ) async throws -> [(AppStorePair, Result<OutageScan.Result, any Error>)] {
        var scans: [(Int, AppStorePair, OutageScan)] = []
        for (index, pair) in pairs.enumerated() {
            let prefix = pairs.count > 1 ? "\(pair.pair): " : ""
            let configuration = try pair.settings.apiConfiguration(warn: { printError(prefix + $0, level: .warning) })
            let client = AppStoreServerAPIClient(configuration: configuration, logger: Logger(label: "appstore-reconcile.detect-outage"))
            scans.append((index, pair.pair, OutageScan(client: client, progress: ProgressLine(enabled: progress, writeLine: { printError($0) }))))
        }
        var results = [Result<OutageScan.Result, any Error>?](repeating: nil, count: scans.count)
        await withTaskGroup(of: (Int, Result<OutageScan.Result, any Error>).self) { group in
            var next = scans.makeIterator()
            func start() {
                guard let (index, _, scan) = next.next() else { return }
                group.addTask {
                    do { return (index, .success(try await scan.scan(since: since, gap: gap, now: now))) } catch { return (index, .failure(error)) }
                }
            }
            for _ in 0..<4 { start() }
            while let (index, result) = await group.next() {
                results[index] = result
                start()
            }
        }
        return scans.map { ($0.1, results[$0.0]!) }
    }

    /// report.md, report.json and report.html of one scan. Reports that cannot be written are a
    /// warning, not a failed scan (a read-only working directory, say): the outages are printed.
    static func writeReports(_ output: Output, _ scanned: OutageScan.Result, lines: [String], to directory: String, prefix: String) {
        do {
            try ReportFiles.write(
                [
                    "report.md": "# Outages\n\n" + lines.map { $0.hasPrefix("  ") ? "    " + $0.dropFirst(2) : $0 + "\n" }.joined(separator: "\n") + "\n",
                    "report.json": try json(output),
                    "report.html": OutageReportPage.html(scanned, commands: output.outages.map(\.command)),
                ],
                to: directory
            )
        } catch {
            printError("\(prefix)warning: the reports were not written to \(directory): \(error); the outages above are complete", level: .warning)
            return
        }
        printError("\(prefix)Reports: \(directory)/report.html (chart), report.md, report.json")
    }
}
