import AppStoreSimulator
@testable import Decisions
import Foundation
import Ledger
import Reconciliation
import SignedData
import TestSupport
import Testing
import ThrowawayPostgres

@Suite("detect-outage")
struct DetectOutageTests {
    @Test func findsTheOutageFromFailedFirstAttemptsAndItsRunCommandRecoversEveryMissedNotification() async throws {
        let harness = try RecoveryHarness(customers: 80, seed: 141, outageHours: 12)
        let outage = try #require(harness.scenario.configuration.outage)
        let missed = harness.scenario.missedNotifications
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            let scan = try await BuiltBinary.run(["detect-outage", "--since", "3d", "--gap", "3h", "--json", "--report-dir", scratch.path + "/outages"], environment: environment)
            #expect(scan.exitCode == 0, "\(scan.combined)")
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            let output = try decoder.decode(DetectOutageOutput.self, from: Data(scan.standardOutput.utf8))
            #expect(output.undelivered == missed.count, "every notification never delivered is found")
            #expect(!output.outages.isEmpty)
            for found in output.outages {
                #expect(found.detected.firstFailure >= outage.lowerBound && found.detected.lastFailure < outage.upperBound, "inside the real outage")
                #expect(found.detected.byResult.values.reduce(0, +) == found.detected.notifications)
                #expect(found.command.hasPrefix("appstore-reconcile run --start "))
            }
            #expect(output.outages.map(\.detected.notifications).reduce(0, +) == missed.count)
            for (a, b) in zip(output.outages, output.outages.dropFirst()) {
                #expect(b.detected.firstFailure.timeIntervalSince(a.detected.lastFailure) > 3 * 3600, "separate outages are more than --gap apart")
            }

            // report.html: the period's chart (3 days: hourly, 72 steps is too many, so 2 hours),
            // every undelivered notification's failed first attempt in a bar, each outage shaded,
            // one row per outage; it loads in a browser without a console message. report.json
            // is what --json printed.
            let (dom, console) = try HeadlessChromium.load(scratch.path + "/outages/report.html")
            #expect(console.isEmpty, "\(console)")
            let chart = try #require(try HeadlessChromium.captures(#"(<svg class="chart" id="timeline"[\s\S]*?</svg>)"#, in: dom).first)
            let failed = try HeadlessChromium.captures(#"<g class="step"[^>]* data-failed="(\d+)""#, in: chart).compactMap { Int($0) }
            #expect(failed.count == 36 || failed.count == 37, "\(failed.count) steps of 2 hours")
            #expect(failed.reduce(0, +) == missed.count)
            #expect(try HeadlessChromium.captures(#"(<rect class="outage")"#, in: chart).count == output.outages.count)
            #expect(try HeadlessChromium.captures(#"<tr data-notifications="(\d+)""#, in: dom).compactMap { Int($0) } == output.outages.map(\.detected.notifications))
            for found in output.outages { #expect(dom.contains(found.command)) }
            #expect(try String(contentsOfFile: scratch.path + "/outages/report.json", encoding: .utf8) == scan.standardOutput)
            let markdown = try String(contentsOfFile: scratch.path + "/outages/report.md", encoding: .utf8)
            #expect(markdown.hasPrefix("# Outages") && markdown.contains("Outage 1: first failed attempt"))
            for found in output.outages { #expect(markdown.contains("    recover: \(found.command)")) }

            let text = try await BuiltBinary.run(["detect-outage", "--since", "3d", "--gap", "3h", "--report-dir", scratch.path + "/outages-text"], environment: environment)
            #expect(text.standardOutput.contains("Outage 1: first failed attempt"), "\(text.standardOutput)")
            for found in output.outages { #expect(text.standardOutput.contains("  recover: \(found.command)")) }

            // The printed commands, as printed (without --dry-run), recover what was missed.
            for (index, found) in output.outages.enumerated() {
                let words = found.command.split(separator: " ").dropFirst().map(String.init).filter { $0 != "--dry-run" }
                let run = try await BuiltBinary.run(words + ["--no-progress", "--rate-factor", "20", "--report-dir", scratch.path + "/r\(index)"], environment: environment)
                #expect(run.exitCode == 0, "\(run.combined)")
            }
            #expect(try await RecoveryHarness.historyUUIDs(client) == Set(missed.map(\.uuid)))
        }
    }

}

/// The JSON `detect-outage --json` prints.
struct DetectOutageOutput: Decodable {
    struct Outage: Decodable {
        var detected: OutageDetection.DetectedOutage
        var command: String
    }
    var undelivered: Int
    var requests: Int
    var outages: [Outage]
}
