@testable import Decisions
import Foundation
import Reports
import Ledger
@testable import Reconciliation
import Testing

/// The report's lists live in spool files while a run goes, and the report files are streamed
/// from them: what comes out must be what went in, and what `JSONEncoder` would have written.
@Suite("Report lists spooled to files")
struct ReportListTests {
    static func missed(_ index: Int) -> RecoveryReport.Missed {
        RecoveryReport.Missed(
            notificationUUID: UUID().uuidString, notificationType: "DID_RENEW", subtype: index.isMultiple(of: 2) ? nil : "BILLING_RECOVERY",
            signedDate: "2026-11-\(10 + index % 10)T00:00:00Z", originalTransactionId: "\(1_000_000 + index)", firstAttemptResult: "TIMED_OUT",
            action: "applied"
        )
    }

    @Test func entriesComeBackInOrderAcrossManyFlushesAndNoSpoolFileIsLeftVisible() throws {
        let before = Set(try Self.spoolFiles())
        do {
            let list = try ReportList<RecoveryReport.Missed>()
            // Enough entries to cross the flush threshold many times.
            let entries = (0..<20_000).map(Self.missed)
            for entry in entries { list.append(entry) }
            #expect(list.count == 20_000)
            #expect(list.map(\.notificationUUID) == entries.map(\.notificationUUID))
            #expect(list.map(\.subtype) == entries.map(\.subtype))
            // Reading does not consume: a second pass sees the same.
            #expect(list.reduce(0) { count, _ in count + 1 } == 20_000)
            list.append(Self.missed(20_000))
            #expect(list.count == 20_001 && Array(list).last?.originalTransactionId == "1020000")
            // Two readers at once, each from its own position.
            var first = list.makeIterator()
            var second = list.makeIterator()
            _ = first.next()
            #expect(second.next()?.notificationUUID == entries[0].notificationUUID)
            #expect(first.next()?.notificationUUID == entries[1].notificationUUID)
            // The spool is unlinked at once: a process killed now leaves nothing in $TMPDIR.
            #expect(Set(try Self.spoolFiles()).subtracting(before).allSatisfy { (try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? Int) ?? 0 < 1_000_000 })
        }
    }

    static func spoolFiles() throws -> [String] {
        let directory = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        return try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { $0.hasPrefix("appstore-reconcile-report-") }.map { directory + "/" + $0 }
    }

    @Test func theStreamedJSONIsValidAndDecodesToTheSameReport() throws {
        let missed = try ReportList<RecoveryReport.Missed>()
        for index in 0..<50 { missed.append(Self.missed(index)) }
        let rejected = try ReportList<RecoveryReport.Rejected>()
        rejected.append(.init(notificationUUID: nil, originalTransactionId: "7", reason: "bad_signature", detail: "a \"quoted\" | detail\nwith a newline"))
        var report = RecoveryReport(
            run: .init(id: "r", mode: .apply, environment: "Sandbox", window: .init(start: "a", end: "b"), startedAt: "s", finishedAt: "f"),
            counts: .init(), missed: missed, rejected: rejected, customers: ReportList([]),
            deliveryFailures: .init(byFirstAttemptResult: ["TIMED_OUT": 50], byHourOfFirstAttempt: [:])
        )
        var repair = RecoveryReport.Repair(originalTransactionId: "7", reasons: ["payload-rejected"])
        repair.outcome = .repaired
        repair.changes = [.init(field: "status", before: "1", after: "5")]
        report.repairs = ReportList([repair])
        report.counts = PassTwoResult(repairs: report.repairs, startedAt: Date(), finishedAt: Date()).counts
        var timeline = ReportTimeline(start: Date(timeIntervalSince1970: 1_790_000_000), end: Date(timeIntervalSince1970: 1_790_086_400))
        timeline.countFirstAttempt(at: Date(timeIntervalSince1970: 1_790_000_100), result: "NO_RESPONSE")
        timeline.countMissed(at: Date(timeIntervalSince1970: 1_790_000_100), type: "DID_RENEW")
        report.timeline = timeline

        let streamed = try report.json()
        let object = try JSONSerialization.jsonObject(with: streamed) as? [String: Any]
        #expect(object?.keys.sorted() == ["counts", "customers", "deliveryFailures", "missed", "rejected", "repairs", "run", "timeline"])
        #expect(try JSONDecoder().decode(RecoveryReport.self, from: streamed).timeline == timeline)
        let decoded = try JSONDecoder().decode(RecoveryReport.self, from: streamed)
        #expect(decoded.missed.map(\.notificationUUID) == missed.map(\.notificationUUID))
        #expect(decoded.rejected.first?.detail == "a \"quoted\" | detail\nwith a newline")
        #expect(decoded.repairs.first?.changes.first?.after == "5")
        #expect(decoded.counts == report.counts && decoded.counts.customersRepaired == 1)
        // The same document JSONEncoder writes for the whole report at once.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let whole = try JSONSerialization.jsonObject(with: try encoder.encode(report)) as? NSDictionary
        #expect(whole == (object.map { NSDictionary(dictionary: $0) }))
    }

    @Test func theReportFilesAreWrittenWholeFromTheSpools() throws {
        let missed = try ReportList<RecoveryReport.Missed>()
        for index in 0..<3 { missed.append(Self.missed(index)) }
        let report = RecoveryReport(
            run: .init(id: "r", mode: .dryRun, environment: "Sandbox", window: .init(start: "a", end: "b"), startedAt: "s", finishedAt: "f"),
            counts: .init(), missed: missed, rejected: ReportList([]), customers: ReportList([]),
            deliveryFailures: .init(byFirstAttemptResult: [:], byHourOfFirstAttempt: [:])
        )
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("report-files-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try report.writeFiles(to: directory)
        #expect(try String(contentsOfFile: directory + "/report.md", encoding: .utf8) == report.markdown())
        #expect(try String(contentsOfFile: directory + "/report.md", encoding: .utf8).contains("## Missed notifications (3)"))
        #expect(try JSONDecoder().decode(RecoveryReport.self, from: Data(contentsOf: URL(fileURLWithPath: directory + "/report.json"))).missed.count == 3)
        #expect(try String(contentsOfFile: directory + "/report.html", encoding: .utf8) == report.html())
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == ["report.html", "report.json", "report.md"], "no partial file left")
        // They name customers: readable by their owner only, whatever the umask.
        func mode(_ path: String) throws -> Int { try (FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1 }
        #expect(try mode(directory) == 0o700)
        for name in ["report.html", "report.json", "report.md"] { #expect(try mode(directory + "/" + name) == 0o600, "\(name)") }
    }
}
