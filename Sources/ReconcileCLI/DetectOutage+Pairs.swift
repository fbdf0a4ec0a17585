import AppStoreServerAPI
import Deployment
import Foundation
import Reports
import Logging
import Reconciliation
import SignedData

/// `detect-outage` over several (app, environment) pairs: the scans side by side, and each one's reports.
extension DetectOutageCommand {
    /// Each pair's scan, up to four at once, each with its own client; in the pairs' order.
    static func scan(
        _ pairs: [Deployment.Pair], since: Date, gap: TimeInterval, now: Date, progress: Bool
    ) async throws -> [(AppStorePair, Result<OutageScan.Result, any Error>)] {
        var scans: [(Int, AppStorePair, OutageScan)] = []
        for (index, pair) in pairs.enumerated() {
            let prefix = pairs.count > 1 ? "\(pair.pair): " : ""
            let client = try pair.apiClient(logger: Logger(label: "appstore-reconcile.detect-outage"), warn: { printError(prefix + $0, level: .warning) })
            scans.append((index, pair.pair, OutageScan(client: client, progress: ProgressLine(enabled: progress, writeLine: { printError($0) }))))
        }
        // The children are added here, in the body, never from a nested function. The release
        // build miscompiled the earlier form, a nested `func start()` that captured the group and
        // the pairs' iterator and added each child: `group.next()` handed back a position of
        // 139,771,456,307,040 for the only pair, and `results[index]` trapped (SIGILL) on every
        // try (issue 48, point 0; the debug build never did). The same children added from the
        // body return their positions intact (seen in the release build, DetectOutageTests run
        // against it by scripts/test).
        let collected = await withTaskGroup(of: (Int, Result<OutageScan.Result, any Error>).self, returning: [Int: Result<OutageScan.Result, any Error>].self) { group in
            var collected: [Int: Result<OutageScan.Result, any Error>] = [:]
            var started = 0
            while started < min(4, scans.count) {
                group.addTask(operation: Self.scanTask(scans[started], since: since, gap: gap, now: now))
                started += 1
            }
            while let (index, result) = await group.next() {
                collected[index] = result
                if started < scans.count {
                    group.addTask(operation: Self.scanTask(scans[started], since: since, gap: gap, now: now))
                    started += 1
                }
            }
            return collected
        }
        return scans.map { scan in (scan.1, collected[scan.0] ?? .failure(CancellationError())) }
    }

    /// One pair's scan, as a child task: its position among the pairs and how it ended.
    static func scanTask(
        _ entry: (Int, AppStorePair, OutageScan), since: Date, gap: TimeInterval, now: Date
    ) -> @Sendable () async -> (Int, Result<OutageScan.Result, any Error>) {
        let (index, _, scan) = entry
        return {
            do { return (index, .success(try await scan.scan(since: since, gap: gap, now: now))) } catch {
                return (index, .failure(error))
            }
        }
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
